"""A custom TensorFlow training loop: ``tf.GradientTape``, a ``tf.data`` pipeline that
shuffles and augments in a parallel ``map``, and a checkpoint to resume from.

Every seed is set (``keras.utils.set_random_seed``), yet runs differ. Two mistakes:
1. The augmentation uses stateful random ops (``tf.image.random_crop``,
   ``tf.random.uniform``) inside ``Dataset.map(num_parallel_calls=AUTOTUNE)``: the
   parallel calls draw from one shared random state in whatever order the threads
   reach it, so which image gets which crop changes from run to run
   (section "Determinism and tf.data" of
   https://www.tensorflow.org/api_docs/python/tf/config/experimental/enable_op_determinism).
2. ``shuffle`` has no seed of its own and the random state of the pipeline is not in
   the checkpoint, so a resumed run replays the first epochs' order and augmentations
   instead of continuing them.

Run:  python examples/tf_custom_loop/broken.py [--epochs 4] [--checkpoint DIR]
      [--stop-after N] [--out weights.npz]
With --checkpoint, a checkpoint is written after each epoch and training resumes from
the latest one found there; --stop-after N stops after epoch N (an interruption).
"""

import argparse

import numpy as np
import tensorflow as tf
import keras
from sklearn.datasets import load_digits

SEED = 0
keras.utils.set_random_seed(SEED)


def augment(image):
    padded = tf.pad(image, [[1, 1], [1, 1], [0, 0]])
    image = tf.image.random_crop(padded, [8, 8, 1])           # MISTAKE 1: stateful random
    return image + tf.random.uniform([8, 8, 1], -0.05, 0.05)   # ops in a parallel map


def make_dataset(images, labels, epoch):
    ds = tf.data.Dataset.from_tensor_slices((images, labels))
    ds = ds.shuffle(len(labels))                               # MISTAKE 2: no seed
    ds = ds.map(lambda img, lab: (augment(img), lab), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.batch(128)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--checkpoint", help="directory to save to and resume from")
    parser.add_argument("--stop-after", type=int, help="stop after this epoch")
    parser.add_argument("--out", help="save the final weights to this .npz file")
    args = parser.parse_args()

    digits = load_digits()
    images = (digits.images / 16.0).astype("float32")[..., None]
    labels = digits.target.astype("int32")

    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                              keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(10)])
    optimizer = keras.optimizers.Adam(0.01)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    epoch = tf.Variable(0, dtype=tf.int64)
    ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=epoch)
    manager = None
    if args.checkpoint:
        manager = tf.train.CheckpointManager(ckpt, args.checkpoint, max_to_keep=1)
        if manager.latest_checkpoint:
            ckpt.restore(manager.latest_checkpoint).assert_consumed()
            print(f"resumed from {manager.latest_checkpoint} at epoch {int(epoch)}")

    while int(epoch) < args.epochs:
        for x, y in make_dataset(images, labels, int(epoch)):
            loss = train_step(x, y)
        epoch.assign_add(1)
        print(f"epoch {int(epoch)} loss {float(loss)!r}")
        if manager:
            manager.save()
        if args.stop_after and int(epoch) >= args.stop_after:
            return

    weights = {w.path.replace("/", "."): w.numpy() for w in model.weights}
    for name, value in weights.items():
        print(f"{name:<26} shape={str(value.shape):<10} sum={float(value.sum())!r}")
    if args.out:
        np.savez(args.out, **weights)


if __name__ == "__main__":
    main()
