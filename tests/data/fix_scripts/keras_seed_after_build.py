"""Broken: keras.utils.set_random_seed(4) is called after the model is built, so its
initial weights are drawn unseeded (the training after it is seeded)."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np


def build():
    return keras.Sequential([keras.Input((3,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(1)])


def main():
    model = build()
    keras.utils.set_random_seed(4)  # too late for the weights
    x = np.arange(60, dtype="float32").reshape(20, 3) / 60
    y = x @ np.array([[1.0], [2.0], [-1.0]], dtype="float32")
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, y, epochs=2, batch_size=5, verbose=0)
    print("kernel sum", float(model.layers[0].kernel.numpy().sum()))


if __name__ == "__main__":
    main()
