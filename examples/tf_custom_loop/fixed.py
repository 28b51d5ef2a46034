"""A custom TensorFlow training loop: ``tf.GradientTape``, a ``tf.data`` pipeline that
shuffles and augments in a parallel ``map``, and a checkpoint to resume from.

The broken variant (broken.py) set every seed and still differed from run to run:
its augmentation used stateful random ops inside a parallel ``Dataset.map``, and its
``shuffle`` had no seed, so a resumed run replayed the first epochs' randomness.

Fixed:
1. ``fwd9m.tensorflow.enable_determinism(seed=SEED)``: seeds everything and turns on
   TensorFlow's op determinism, which also makes any stateful random op left in a
   ``Dataset.map`` run serially, in order
   (https://www.tensorflow.org/api_docs/python/tf/config/experimental/enable_op_determinism).
2. The pipeline is a pure function of ``(SEED, epoch)``: ``shuffle`` gets a seed derived
   for the epoch, and the augmentation uses stateless random ops seeded by (epoch seed,
   element index), so it stays parallel and fast, and a run resumed from the checkpoint
   of epoch N draws exactly what an uninterrupted run draws in epoch N+1.

Run:  python examples/tf_custom_loop/fixed.py [--epochs 4] [--checkpoint DIR]
      [--stop-after N] [--out weights.npz]
With --checkpoint, a checkpoint is written after each epoch and training resumes from
the latest one found there; --stop-after N stops after epoch N (an interruption).
"""

import argparse

import numpy as np
import tensorflow as tf
import keras
from sklearn.datasets import load_digits

import fwd9m
import fwd9m.tensorflow

SEED = 0
fwd9m.tensorflow.enable_determinism(seed=SEED)  # FIX 1


def augment(image, seed):
    """Random crop of the padded image plus noise, from stateless ops: the same ``seed``
    (an int64 tensor of shape [2]) always gives the same result, in any thread."""
    crop_seed, noise_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    padded = tf.pad(image, [[1, 1], [1, 1], [0, 0]])
    image = tf.image.stateless_random_crop(padded, [8, 8, 1], seed=crop_seed)
    return image + tf.random.stateless_uniform([8, 8, 1], noise_seed, -0.05, 0.05)


def make_dataset(images, labels, epoch):
    """The pipeline of ``epoch``: a pure function of (SEED, epoch) (FIX 2)."""
    shuffle_seed = fwd9m.derive_seed(SEED, "shuffle", epoch, bits=31)
    augment_seed = fwd9m.derive_seed(SEED, "augment", epoch, bits=31)
    index = tf.range(len(labels), dtype=tf.int64)
    ds = tf.data.Dataset.from_tensor_slices((images, labels, index))
    ds = ds.shuffle(len(labels), seed=shuffle_seed)
    ds = ds.map(lambda img, lab, i: (augment(img, tf.stack([augment_seed, i])), lab),
                num_parallel_calls=tf.data.AUTOTUNE)
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
