"""A Hugging Face ``TrainerCallback`` writing step digests (imports transformers when
imported).

    from fwd9m.steps.transformers import StepDigestCallback
    trainer = Trainer(..., callbacks=[StepDigestCallback("run.steps")])

Per optimizer step (``on_optimizer_step``: after the update, before ``Trainer`` zeroes
the gradients, in ``Trainer._inner_training_loop``, transformers/trainer.py): the
gradients, parameters, buffers, optimizer state, learning rate and global RNG states;
at train begin the initial parameters. ``Trainer`` passes neither the loss nor the
batch to callbacks, so they are not recorded (a changed batch shows in the gradients
of the same step). Under ``fwd9m run --digests/--against`` leave out the path.
"""

from __future__ import annotations

import os

from transformers import TrainerCallback

from ._session import require

__all__ = ["StepDigestCallback"]


def _torch_optimizer(optimizer):
    """The torch optimizer inside accelerate's ``AcceleratedOptimizer`` wrapper."""
    return getattr(optimizer, "optimizer", optimizer)


class StepDigestCallback(TrainerCallback):
    """Record one step digest per optimizer step.

    Args:
        path: digest file (default: the one of ``fwd9m run --digests``).
    Raises:
        ConfigurationError: no path and not under ``fwd9m run --digests/--against``.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.session = require(path, "StepDigestCallback")
        self._initial: list = []

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        from ._torch import initial_entries

        self.session.claim("transformers")
        try:
            if model is not None and optimizer is not None:
                self._initial = initial_entries(_torch_optimizer(optimizer), model)
        except Exception as exc:  # noqa: BLE001 - never break training
            self.session._warn(exc)

    def on_optimizer_step(self, args, state, control, model=None, optimizer=None, **kwargs):
        if model is None or optimizer is None:
            return
        self.session.record_safely(lambda: self._entries(model, optimizer), source="transformers")

    def _entries(self, model, optimizer) -> list:
        from ._torch import optimizer_entries

        entries = self._initial + optimizer_entries(_torch_optimizer(optimizer), model)
        self._initial = []
        return entries
