"""Broken: a tf.data map with random augmentation (tf.random.uniform, a stateful op)
runs with num_parallel_calls=AUTOTUNE; the global seed is set, but which element takes
which random draw depends on thread timing, so the augmented data differ between runs."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf

tf.random.set_seed(11)


def augment(x):
    noise = tf.random.uniform(tf.shape(x), -0.2, 0.2)
    scale = tf.random.uniform([], 0.8, 1.2)
    return x * scale + noise


def main():
    data = tf.reshape(tf.range(4096, dtype=tf.float32) / 4096.0, (1024, 4))
    ds = tf.data.Dataset.from_tensor_slices(data).map(augment, num_parallel_calls=tf.data.AUTOTUNE).batch(64)
    w = tf.Variable(tf.ones((4, 1)))
    opt = tf.keras.optimizers.SGD(0.05)
    for xb in ds:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((xb @ w - 1.0) ** 2)
        opt.apply_gradients([(tape.gradient(loss, w), w)])
    print("w", w.numpy().ravel().tolist())


if __name__ == "__main__":
    main()
