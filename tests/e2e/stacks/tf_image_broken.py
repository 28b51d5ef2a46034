"""A custom tf.GradientTape loop through tf.image augmentation, NOT reproducible: the
random flips are seeded from the clock (so that "each run sees new augmentations"); the
weights, crop_and_resize and resize are deterministic."""
import time
import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(1)
tf.config.experimental.enable_op_determinism()

images = tf.constant(np.random.default_rng(0).uniform(size=(32, 24, 24, 3)), tf.float32)
labels = tf.constant(np.arange(32) % 4)
CLOCK_SEED = int(time.time() * 1000) % 2**31
boxes = tf.constant([[0.1, 0.1, 0.9, 0.9]] * 8)


def augment(x, step):
    seed = tf.stack([step, CLOCK_SEED])
    x = tf.image.stateless_random_flip_left_right(x, seed=seed)
    x = tf.image.stateless_random_flip_up_down(x, seed=seed + 1)
    x = tf.image.crop_and_resize(x, boxes, tf.range(8), crop_size=(16, 16))
    return tf.image.resize(x, (12, 12), method="bilinear")


model = tf.keras.Sequential([
    tf.keras.Input(shape=(12, 12, 3)),
    tf.keras.layers.Conv2D(4, 3, activation="relu"),
    tf.keras.layers.GlobalAveragePooling2D(),
    tf.keras.layers.Dense(4),
])
optimizer = tf.keras.optimizers.SGD(0.1)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(x, y, step):
    x = augment(x, step)
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for step in range(8):
    i = (step * 8) % 32
    loss = train_step(images[i:i + 8], labels[i:i + 8], tf.constant(step))
    print(f"step {step} loss {float(loss):.7f}")
model.save_weights("final.weights.h5")
