"""A Keras 3 callback writing step digests (imports Keras when imported).

    from fwd9m.steps.keras import StepDigests
    model.fit(x, y, callbacks=[StepDigests("run.steps")])

Per training batch (``on_train_batch_end``): the loss Keras logs, the trainable
weights (``params``), the non-trainable ones (``buffers``: batch-norm statistics), the
optimizer's variables (its iteration count, moments, learning rate) and the RNG states
(the model's seed generators, Python and NumPy); at train begin the initial weights.
Keras does not hand the gradients or the batch to callbacks, so they are not recorded.
Under ``fwd9m run --digests/--against`` leave out the path.
"""

from __future__ import annotations

import os

import keras

from ._session import require
from ._values import digest_groups, digest_leaves, global_rng_leaves, meta_of

__all__ = ["StepDigests"]


def _named(variables) -> list:
    return [(getattr(v, "path", None) or getattr(v, "name", f"var{i}"), v) for i, v in enumerate(variables)]


class StepDigests(keras.callbacks.Callback):
    """Record one step digest per training batch.

    Args:
        path: digest file (default: the one of ``fwd9m run --digests``).
    Raises:
        ConfigurationError: no path and not under ``fwd9m run --digests/--against``.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        self.session = require(path, "StepDigests")
        self._initial: list = []

    def on_train_begin(self, logs=None) -> None:
        self.session.claim("keras")
        try:
            self._initial = digest_leaves("initial", _named(self.model.weights))
        except Exception as exc:  # noqa: BLE001 - never break fit
            self.session._warn(exc)

    def on_train_batch_end(self, batch, logs=None) -> None:
        self.session.record_safely(lambda: self._entries(logs), source="keras")

    def _entries(self, logs) -> list:
        from ..keras._rng import layer_generators

        entries, self._initial = self._initial, []
        if logs and "loss" in logs:
            entries += digest_leaves("loss", [("loss", logs["loss"])])
        groups = [("params", _named(self.model.trainable_weights))]
        groups.append(("buffers", _named(self.model.non_trainable_weights)))
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is not None:
            groups.append(("optimizer", _named(optimizer.variables)))
        gens = [(f"seed:{p}", sg.state) for p, sg in layer_generators(self.model).items()]
        groups.append(("rng", gens))
        return entries + _variable_digests(groups) + digest_leaves("rng", global_rng_leaves())


def _variable_digests(groups: list) -> list:
    """:func:`digest_groups` of Keras variables: under the TensorFlow backend all are read
    in one ``tf.function`` call (:mod:`fwd9m.tensorflow._many`, the same digests), else
    (or when that path does not apply) one by one."""
    if keras.config.backend() == "tensorflow":
        from ..tensorflow._many import cpu_digests

        flat = [(g, n, v) for g, leaves in groups for n, v in leaves]
        digests = cpu_digests([getattr(v, "value", v) for _, _, v in flat])
        if digests is not None:
            return [(g, n, meta_of(v), d) for (g, n, v), d in zip(flat, digests)]
    return digest_groups(groups)
