import random

import tensorflow as tf

print("noise", float(tf.random.normal([])))  # HARMLESS: only printed
x = tf.ones([4, 3])
y = tf.multiply(x, random.random())  # MATTERS: a Python float
print(float(tf.reduce_sum(y)))
