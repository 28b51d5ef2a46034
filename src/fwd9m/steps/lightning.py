"""A PyTorch Lightning callback writing step digests (imports Lightning when imported).

    from fwd9m.steps.lightning import StepDigests
    trainer = pl.Trainer(callbacks=[StepDigests("run.steps")])

Per training batch: the loss (``training_step``'s output), the batch, the gradients,
parameters, buffers, optimizer state and global RNG states; before the first batch the
initial parameters. Under ``fwd9m run --digests/--against`` leave out the path: the
callback writes that file and compares with the reference, in place of the automatic
optimizer hook. Either ``pytorch_lightning`` or ``lightning`` is used, whichever is
installed (Lightning calls a callback of its own package only).
"""

from __future__ import annotations

import os
from typing import Any

try:
    import pytorch_lightning as pl
except ImportError:  # the unified package
    import lightning.pytorch as pl  # type: ignore[no-redef,import-not-found]

from ._session import require
from ._values import digest_leaves, flatten

__all__ = ["StepDigests"]


class StepDigests(pl.Callback):
    """Record one step digest per training batch.

    Args:
        path: digest file (default: the one of ``fwd9m run --digests``).
    Raises:
        ConfigurationError: no path and not under ``fwd9m run --digests/--against``.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        self.session = require(path, "StepDigests")
        self._initial: list[Any] = []

    def on_train_start(self, trainer, pl_module) -> None:
        from ._torch import initial_entries

        self.session.claim("lightning")
        try:
            self._initial = initial_entries(trainer.optimizers[0], pl_module) if trainer.optimizers else []
        except Exception as exc:  # noqa: BLE001 - never break training
            self.session._warn(exc)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.session.record_safely(lambda: self._entries(trainer, pl_module, outputs, batch), source="lightning")

    def _entries(self, trainer, pl_module, outputs, batch) -> list:
        from ._torch import optimizer_entries

        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        entries = self._initial + digest_leaves("batch", [(n or "batch", v) for n, v in flatten("", batch)])
        self._initial = []
        if loss is not None:
            entries += digest_leaves("loss", [("loss", loss)])
        for opt in trainer.optimizers:
            entries += optimizer_entries(opt, pl_module)
        return entries
