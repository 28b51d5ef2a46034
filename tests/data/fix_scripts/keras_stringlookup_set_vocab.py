"""Broken: a Keras StringLookup's vocabulary is list(set(tokens)); a set's order follows
string hashing, salted per process (PYTHONHASHSEED), so token ids, and the embedding
rows they train, differ between runs although keras.utils.set_random_seed is called."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras
import numpy as np

keras.utils.set_random_seed(2)

sentences = ["red apple", "green apple", "red car", "blue car", "green tree", "blue sky"]
labels = np.array([0, 0, 1, 1, 0, 1])
tokens = {t for s in sentences for t in s.split()}
lookup = keras.layers.StringLookup(vocabulary=list(tokens))  # set order

ids = lookup(np.array([s.split() for s in sentences]))
model = keras.Sequential([
    keras.layers.Embedding(lookup.vocabulary_size(), 4),
    keras.layers.GlobalAveragePooling1D(),
    keras.layers.Dense(1, activation="sigmoid"),
])
model.compile(optimizer="sgd", loss="binary_crossentropy")
model.fit(ids, labels, epochs=3, batch_size=2, verbose=0, shuffle=False)
print("vocab", lookup.get_vocabulary())
print("embedding sum", float(model.layers[0].embeddings.numpy().sum()))
