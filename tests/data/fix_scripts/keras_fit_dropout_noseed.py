"""Broken: a Keras model with Dropout trained with fit() and no seed anywhere: the
initial weights, the dropout masks and fit's shuffle differ in every run."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np

x = np.linspace(0, 1, 400, dtype="float32").reshape(-1, 4)
y = (x.sum(axis=1) > 2).astype("float32")

model = keras.Sequential([
    keras.Input((4,)),
    keras.layers.Dense(16, activation="relu"),
    keras.layers.Dropout(0.3),
    keras.layers.Dense(1, activation="sigmoid"),
])
model.compile(optimizer="adam", loss="binary_crossentropy")
history = model.fit(x, y, epochs=3, batch_size=20, verbose=0)
print("losses", history.history["loss"])
