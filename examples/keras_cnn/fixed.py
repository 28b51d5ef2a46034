"""A small Keras CNN on scikit-learn's digits (8x8 images) with random augmentation
layers, dropout and ``model.fit(shuffle=True)``.

The broken variant (broken.py) had one mistake: the seed was set after the model was
built. Keras 3 layers and initializers created without a ``seed`` take one from
Python's ``random`` module when they are constructed (``make_default_seed`` in
https://github.com/keras-team/keras/blob/master/keras/src/random/seed_generator.py),
so the initial weights, the dropout masks and the augmentations are already fixed,
differently in every process, when ``keras.utils.set_random_seed`` runs.

Fixed: enable determinism, with the seed, before anything is built.

Run:  python examples/keras_cnn/fixed.py [--out weights.npz]
"""

import argparse

import numpy as np
import keras
from sklearn.datasets import load_digits

import fwd9m.tensorflow

fwd9m.tensorflow.enable_determinism(seed=0)  # FIX: first, before any layer exists


def build_model():
    return keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.RandomTranslation(0.125, 0.125, fill_mode="constant"),
        keras.layers.RandomRotation(0.05, fill_mode="constant"),
        keras.layers.Conv2D(8, 3, activation="relu", padding="same"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.25),
        keras.layers.Dense(10, activation="softmax"),
    ])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", help="save the final weights to this .npz file")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()

    digits = load_digits()
    x = (digits.images / 16.0).astype("float32")[..., None]
    y = digits.target.astype("int32")

    model = build_model()
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    history = model.fit(x, y, batch_size=64, epochs=args.epochs, shuffle=True, verbose=0)

    print(f"final loss {history.history['loss'][-1]!r}")
    weights = {w.path.replace("/", "."): w.numpy() for w in model.weights}
    for name, value in weights.items():
        print(f"{name:<26} shape={str(value.shape):<14} sum={float(value.sum())!r}")
    if args.out:
        np.savez(args.out, **weights)


if __name__ == "__main__":
    main()
