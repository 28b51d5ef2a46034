import numpy as np
import tensorflow as tf

tf.random.uniform([3])  # HARMLESS: never used
w = tf.constant(np.ones((3, 2), dtype=np.float32))
x = tf.constant(np.random.rand(4, 3).astype(np.float32))
y = tf.matmul(x, w)  # MATTERS: an unseeded NumPy batch
print(float(tf.reduce_sum(y)))
