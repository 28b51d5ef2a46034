"""A custom Keras layer whose weights come from add_weight initialisers.

Only ``tf.random.set_seed(1)`` is called, so the initialisers (which draw their seeds
without consulting TensorFlow's global seed in Keras 3) give different weights in every
fresh process. ``--fixed`` uses ``fwd9m.tensorflow.enable_determinism(seed=1)`` instead.
"""
import sys

import numpy as np
import tensorflow as tf
import keras

if "--fixed" in sys.argv:
    import fwd9m.tensorflow

    fwd9m.tensorflow.enable_determinism(seed=1)
else:
    tf.random.set_seed(1)


class Scale(keras.layers.Layer):
    def build(self, input_shape):
        self.kernel = self.add_weight(name="kernel", shape=(input_shape[-1], 4),
                                      initializer="random_normal")
        self.offset = self.add_weight(name="offset", shape=(4,), initializer="random_uniform")

    def call(self, x):
        return tf.matmul(x, self.kernel) + self.offset


model = keras.Sequential([keras.Input((3,)), Scale(name="scale")])
y = model(np.ones((2, 3), dtype="float32"))
print("output sum:", float(tf.reduce_sum(y)))

if "--save" in sys.argv:  # also compare saved files, tensor by tensor
    model.save("model.keras")
    tf.train.Checkpoint(kernel=model.layers[-1].kernel.value).write("ckpt/weights")
