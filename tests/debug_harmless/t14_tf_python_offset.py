import random

import tensorflow as tf

noise = tf.random.uniform([4, 2])  # HARMLESS
noise = tf.zeros([4, 2])
w = tf.Variable(tf.ones([2, 1]))
x = tf.ones([4, 2]) + noise
with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.matmul(x, w) * random.uniform(0.5, 1.5))  # MATTERS
w.assign_sub(0.1 * tape.gradient(loss, w))
