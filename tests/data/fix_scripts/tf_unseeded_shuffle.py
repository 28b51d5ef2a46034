"""Broken: tf.data shuffle() without a seed and no global seed (tf.random.set_seed is
never called): the batch order differs in every run, and so does the trained model.
The layers' initializers are seeded, so the shuffle is the only source."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf

x = np.linspace(-1, 1, 512, dtype=np.float32).reshape(-1, 1)
y = 2 * x - 1
ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(512).batch(32)  # no seed

w = tf.Variable(tf.keras.initializers.GlorotUniform(seed=1)((1, 1)))
b = tf.Variable(tf.zeros((1,)))
opt = tf.keras.optimizers.SGD(0.1)
for epoch in range(2):
    for xb, yb in ds:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((xb @ w + b - yb) ** 2)
        opt.apply_gradients(zip(tape.gradient(loss, [w, b]), [w, b]))
    print("epoch", epoch, "loss", float(loss))
print("w", w.numpy().tolist(), "b", b.numpy().tolist())
