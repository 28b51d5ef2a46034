"""The custom Keras layer of ``broken.py``, fixed: ``fwd9m.tensorflow.enable_determinism``
seeds Python's ``random`` too, from which Keras 3 draws the seed of an initializer created
without one (``keras.src.random.seed_generator.make_default_seed``,
https://github.com/keras-team/keras/blob/master/keras/src/random/seed_generator.py),
so every run prints the same weights.

Run:  python examples/keras_custom_layer/fixed.py [--out weights.npz]
"""

import argparse

import numpy as np
import tensorflow as tf
import keras

import fwd9m.tensorflow
from sklearn.datasets import load_digits

fwd9m.tensorflow.enable_determinism(seed=1)  # FIX: seeds Python, NumPy, TF, Keras; op determinism


class ScaledDense(keras.layers.Layer):
    """``y = (x @ kernel) * scale + bias``, its weights made with ``add_weight``."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units),
                                      initializer="glorot_uniform", name="kernel")
        self.scale = self.add_weight(shape=(self.units,),
                                     initializer=keras.initializers.RandomUniform(0.5, 1.5),
                                     name="scale")
        self.bias = self.add_weight(shape=(self.units,), initializer="zeros", name="bias")

    def call(self, x):
        return tf.matmul(x, self.kernel) * self.scale + self.bias


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", help="save the final weights to this .npz file")
    args = parser.parse_args()

    digits = load_digits()
    x = (digits.data / 16.0).astype("float32")
    y = digits.target.astype("int32")

    model = keras.Sequential([keras.Input((64,)), ScaledDense(32, name="hidden"),
                              keras.layers.Activation("relu"), ScaledDense(10, name="logits")])
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=128, epochs=2, shuffle=False, verbose=0)

    weights = {w.path.replace("/", "."): w.numpy() for w in model.weights}
    for name, value in weights.items():
        print(f"{name:<22} shape={str(value.shape):<9} sum={float(value.sum())!r}")
    if args.out:
        np.savez(args.out, **weights)


if __name__ == "__main__":
    main()
