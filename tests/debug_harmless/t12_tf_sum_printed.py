import numpy as np
import tensorflow as tf

print("check", tf.reduce_sum(tf.random.uniform([4])).numpy())  # HARMLESS
w = tf.Variable(tf.ones([3, 1]))
x = tf.constant(np.random.rand(4, 3).astype(np.float32))
with tf.GradientTape() as tape:
    loss = tf.reduce_mean(tf.matmul(x, w) ** 2)  # MATTERS
grad = tape.gradient(loss, w)
w.assign_sub(0.1 * grad)
