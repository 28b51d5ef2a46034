"""Keras fit that resumes exactly: BackupAndRestore (weights, optimizer, epoch) plus
fwd9m's RngStateCheckpoint (the dropout layer's SeedGenerator, the shuffle's RNGs)."""
import numpy as np

import keras

import fwd9m.callbacks

keras.utils.set_random_seed(0)
x = np.random.default_rng(0).normal(size=(64, 8)).astype("float32")
y = x[:, :1] * 2.0
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dropout(0.5), keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
callbacks = [keras.callbacks.BackupAndRestore("backup"), fwd9m.callbacks.RngStateCheckpoint("backup/rng.npz")]
model.fit(x, y, epochs=3, batch_size=16, verbose=2, callbacks=callbacks)
model.save_weights("final.weights.h5")
