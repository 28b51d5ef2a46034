"""What ``fwd9m debug`` says about Keras 3's own random state (no Keras import here).

Keras 3 draws every random value of its layers and initializers (dropout masks, initial
weights) from a ``keras.random.SeedGenerator``, whose state is a variable of shape
``(2,)`` holding ``[seed, counter]`` in the backend's seed dtype (``uint32`` on JAX,
``int32`` on TensorFlow and torch): ``SeedGenerator.__init__`` and ``draw_seed`` in
https://github.com/keras-team/keras/blob/master/keras/src/random/seed_generator.py.
A generator made without a seed takes it from Python's ``random``
(``make_default_seed``), which only ``keras.utils.set_random_seed`` seeds for Keras
(https://github.com/keras-team/keras/blob/master/keras/src/utils/rng_utils.py).
"""

from __future__ import annotations

__all__ = ["SEED_STATE_METAS", "seed_state_explanation"]

#: dtype[shape] of a SeedGenerator's state (and of a seed Keras draws from it), per backend
SEED_STATE_METAS = frozenset({"uint32[2]", "int32[2]"})

_FIX = (
    "import keras\n"
    "keras.utils.set_random_seed(0)  # first, before building the model: seeds Keras' SeedGenerators\n"
    "# (and Python's random, NumPy and the backend); or give each layer a seed: Dropout(0.5, seed=0)"
)


def seed_state_explanation(told: dict, op: str, location: str, detail: str = "") -> dict:
    """The explanation of a first divergence whose differing value is a Keras
    SeedGenerator's state: ``told`` with the headline, causes, fix and ``why`` (from the
    divergence's ``detail``: "input 0 of OP (uint32[2]) is ...") of that."""
    what = detail.split(" is ", 1)[0] if " is " in detail else f"a value {op} reads"
    causes = [
        "a Keras layer or initializer made without a seed (Dropout, RandomFlip, an initializer) takes "
        "its SeedGenerator's seed from Python's random, which nothing seeded",
        "keras.utils.set_random_seed is not called, or is called after the model is built",
    ]
    return dict(
        told,
        source="seed",
        headline=(
            f"Keras SeedGenerator state differs: seed with keras.utils.set_random_seed(S) "
            f"(the value {op} reads at {location or '?'} is the [seed, counter] state Keras "
            f"draws its layers' random values from)"
        ),
        causes=causes,
        fix=_FIX,
        why=(
            f"{what} is a Keras SeedGenerator's state that differs between the runs and was not "
            f"produced by any recorded op: its seed came from outside them (Python's random)"
        ),
    )
