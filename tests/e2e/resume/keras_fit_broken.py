"""Keras fit with BackupAndRestore only: the weights, optimizer and epoch come back, the
random state (dropout's SeedGenerator, the shuffle) does not."""
import numpy as np

import keras

keras.utils.set_random_seed(0)
x = np.random.default_rng(0).normal(size=(64, 8)).astype("float32")
y = x[:, :1] * 2.0
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dropout(0.5), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
model.fit(x, y, epochs=3, batch_size=16, verbose=2, callbacks=[keras.callbacks.BackupAndRestore("backup")])
model.save_weights("final.weights.h5")
