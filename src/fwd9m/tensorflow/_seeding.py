"""Seeding for :func:`fwd9m.tensorflow.enable_determinism`: TensorFlow, plus Keras
when Keras is already imported (never imported here).

Keras 3 must be seeded itself: its initializers draw their seeds from Python's
``random``, which ``tf.random.set_seed`` alone does not seed (``make_default_seed`` in
https://github.com/keras-team/keras/blob/master/keras/src/random/seed_generator.py).
tf_keras (Keras 2) initializers use TF's global seed, which seeding "tensorflow" covers.
"""

from __future__ import annotations

from ..enable import Change, is_fully_imported, seed_change


def seed(seed: int | None) -> Change | None:
    """Seed Python, NumPy and TensorFlow (and Keras 3 if imported) through
    :func:`fwd9m.seed.seed_everything`; None: no seeding, returns None.

    Args:
        seed: int in ``[0, 2**32 - 1]`` or None.

    Returns:
        The :class:`~fwd9m.enable.Change` record, or None when ``seed`` is None.
    """
    frameworks = ["keras", "tensorflow"] if is_fully_imported("keras") else ["tensorflow"]
    return seed_change("tensorflow", seed, frameworks)
