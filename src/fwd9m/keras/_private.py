"""Keras 3's private API, in one module (as :mod:`fwd9m.torch._private` is for torch).

Everything here is private to Keras and may change between releases; keep its use in
this file so a Keras upgrade breaks one place (``tests/test_rng.py`` checks these facts
against the installed Keras). Checked against Keras 3.15.1:

* ``keras.src.backend.common.global_state``: ``get_global_attribute(name)`` and
  ``set_global_attribute(name, value)`` read and write Keras' per-thread global state
  (attributes of a ``threading.local``). Source:
  https://github.com/keras-team/keras/blob/master/keras/src/backend/common/global_state.py
* ``keras.src.utils.rng_utils.GLOBAL_RANDOM_SEED`` (``"global_random_seed"``): the
  global-state key where ``keras.utils.set_random_seed`` stores the seed;
  ``rng_utils.get_random_seed()`` reads it (not exported under ``keras.utils``).
  Source: https://github.com/keras-team/keras/blob/master/keras/src/utils/rng_utils.py
* ``keras.src.random.seed_generator.GLOBAL_SEED_GENERATOR``
  (``"global_seed_generator"``): the global-state key of the ``SeedGenerator`` that
  ``keras.random`` functions use when given no seed; ``global_seed_generator()``
  creates it on first use, and ``set_random_seed`` sets it to None so that it is
  recreated from the new seed. Source:
  https://github.com/keras-team/keras/blob/master/keras/src/random/seed_generator.py
* ``Layer._flatten_layers(include_self, recursive)`` and ``Layer._seed_generators``:
  a layer and its sublayers, and the ``SeedGenerator`` objects each layer tracks.
  Source: https://github.com/keras-team/keras/blob/master/keras/src/layers/layer.py
* ``keras.src.callbacks.callback_list.CallbackList``: what ``fit`` wraps its callbacks
  in (``fwd9m check --resume`` adds its step hook there), and ``keras.src.tree.flatten``,
  which it uses to flatten the callbacks it is given. Source:
  https://github.com/keras-team/keras/blob/master/keras/src/callbacks/callback_list.py
* ``keras.src.backend.tensorflow.trainer.TensorFlowTrainer._make_function(step_function)``:
  builds ``train_function`` / ``test_function`` (``make_train_function``). The function
  it returns runs ``multi_step_on_iterator``, a plain ``tf.function``, when it is given
  a ``tf.data.Iterator`` (what ``fit`` passes); the step ``one_step_on_data`` (a
  ``tf.function(jit_compile=self.jit_compile)``) is then called inside that graph.
  Given any other iterable it calls ``one_step_on_data`` eagerly on each of up to
  ``steps_per_execution`` batches and returns the last outputs (its ``else`` branch).
  ``fwd9m debug`` (:mod:`fwd9m.keras._tf_xla`) uses that branch. Source:
  https://github.com/keras-team/keras/blob/master/keras/src/backend/tensorflow/trainer.py

Every function imports Keras' private modules when called: importing this module
imports no framework.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "callback_list_class",
    "tf_trainer_class",
    "flatten",
    "global_seed",
    "set_global_seed",
    "global_seed_generator",
    "set_global_seed_generator",
    "layer_seed_generators",
    "sublayers",
]


def global_seed() -> int | None:
    """The seed last stored by ``keras.utils.set_random_seed`` (or
    :func:`set_global_seed`); None when none is set."""
    from keras.src.utils import rng_utils

    return rng_utils.get_random_seed()


def set_global_seed(seed: int | None) -> None:
    """Store ``seed`` as Keras' global seed, as ``keras.utils.set_random_seed`` does,
    without seeding anything else (that function also seeds Python, NumPy and
    TensorFlow, importing TensorFlow when it is installed)."""
    from keras.src.backend.common import global_state
    from keras.src.utils import rng_utils

    global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, seed)


def global_seed_generator() -> Any:
    """Keras' global ``keras.random.SeedGenerator``, or None when it does not exist
    yet (unlike Keras' own getter, this does not create it)."""
    from keras.src.backend.common import global_state
    from keras.src.random import seed_generator

    return global_state.get_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR)


def set_global_seed_generator(generator: Any) -> None:
    """Install ``generator`` (a ``keras.random.SeedGenerator``) as Keras' global one;
    None drops it, so Keras recreates it from the global seed on next use."""
    from keras.src.backend.common import global_state
    from keras.src.random import seed_generator

    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, generator)


def sublayers(layer: Any, include_self: bool = False) -> list:
    """``layer``'s sublayers, recursively, in Keras' layer order (and ``layer`` first
    when ``include_self``); ``[]`` (or ``[layer]``) for an object that is not a Keras
    layer."""
    if not hasattr(layer, "_flatten_layers"):
        return [layer] if include_self else []
    return list(layer._flatten_layers(include_self=include_self, recursive=True))


def layer_seed_generators(layer: Any) -> list:
    """Every ``keras.random.SeedGenerator`` tracked by ``layer`` and its sublayers
    (Keras keeps no public list of them), in Keras' layer order."""
    layers = sublayers(layer, include_self=True)
    return [sg for lay in layers for sg in getattr(lay, "_seed_generators", ())]


def callback_list_class() -> Any:
    """``keras.src.callbacks.callback_list.CallbackList``."""
    from keras.src.callbacks.callback_list import CallbackList

    return CallbackList


def flatten(structure: Any) -> list:
    """``keras.src.tree.flatten``."""
    from keras.src import tree

    return tree.flatten(structure)


def tf_trainer_class() -> Any:
    """``keras.src.backend.tensorflow.trainer.TensorFlowTrainer`` once Keras has imported
    it (Keras imports the trainer of its active backend only); None before, and while
    that module is still being imported. Imports nothing."""
    import sys

    return getattr(sys.modules.get("keras.src.backend.tensorflow.trainer"), "TensorFlowTrainer", None)
