"""Keras 3 fit, reproducible: keras.utils.set_random_seed + op determinism, Dropout,
shuffled fit, and the ModelCheckpoint, CSVLogger, TensorBoard and BackupAndRestore
callbacks, with the progress bar (verbose=1)."""
import keras
import numpy as np
import tensorflow as tf

keras.utils.set_random_seed(42)
tf.config.experimental.enable_op_determinism()

rng = np.random.default_rng(0)
x = rng.normal(size=(128, 8)).astype("float32")
y = (x[:, 0] + x[:, 1] > 0).astype("float32")

model = keras.Sequential([
    keras.Input(shape=(8,)),
    keras.layers.Dense(16, activation="relu"),
    keras.layers.Dropout(0.2),
    keras.layers.Dense(1, activation="sigmoid"),
])
model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
callbacks = [
    keras.callbacks.ModelCheckpoint("checkpoints/model_{epoch:02d}.keras"),
    keras.callbacks.CSVLogger("training.csv"),
    keras.callbacks.TensorBoard(log_dir="tb"),
    keras.callbacks.BackupAndRestore(backup_dir="backup"),
]
history = model.fit(x, y, epochs=2, batch_size=16, validation_split=0.25, callbacks=callbacks, verbose=1)
print("final loss", history.history["loss"][-1])
model.save("model.keras")
