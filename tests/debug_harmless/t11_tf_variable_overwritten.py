import numpy as np
import tensorflow as tf

v = tf.Variable(tf.random.normal([3, 2]))  # HARMLESS: assigned over below
v.assign(tf.ones([3, 2]))
x = tf.constant(np.random.rand(4, 3).astype(np.float32))
y = tf.matmul(x, v)  # MATTERS
print(float(tf.reduce_sum(y)))
