"""A Keras 3 callback that saves and restores every RNG state with the checkpoints.

Keras weight checkpoints (``ModelCheckpoint``, ``BackupAndRestore``) do not hold the
state of the layers' ``SeedGenerator``s: ``Layer.save_own_variables`` saves
``_trainable_variables + _non_trainable_variables`` while seed-generator states are
listed apart (``Layer.variables`` adds ``sg.state`` for each of ``_seed_generators``),
keras/src/layers/layer.py in https://github.com/keras-team/keras. A resumed run
therefore replays the dropout masks of epoch 0. :class:`RngStateCheckpoint` saves those
states, the global RNGs and the registered generators at each epoch end, and restores
them when training begins again.

Importing this module imports Keras (it is not imported by ``import fwd9m``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import keras

from . import rng
from ._log import logger
from ._runtime.launch import shown
from .keras._rng import layer_generators, layer_state, set_layer_state
from .rng._format import _restore
from .rng._format import read_file as _read_rng_file

__all__ = ["RngStateCheckpoint"]

_MODEL = "keras.model"
_PROGRESS = "fwd9m.progress"


class RngStateCheckpoint(keras.callbacks.Callback):
    """Save RNG state at each epoch end; restore it at train begin.

    Put it in the same ``fit`` as ``BackupAndRestore`` (automatic resume) or
    ``ModelCheckpoint`` (resume by ``load_weights`` + ``fit(initial_epoch=...)``).

    Args:
        filepath: the state file (``fwd9m.save_rng_state`` format). May contain
            ``{epoch}`` (1-based, as ``ModelCheckpoint``) to keep one file per epoch.
        restore_from: file to restore at train begin; default ``filepath`` when it has
            no ``{epoch}`` and exists. A missing file means a fresh start.
        restore: False to only save.

    Attributes:
        initial_epoch: epochs completed in the restored state (0 on a fresh start).
        epoch_variable: an int64 ``tf.Variable`` holding ``initial_epoch``, for
            ``fwd9m.data.tf_epochs(first_epoch=...)`` (created on first access;
            needs TensorFlow).

    Raises (at train begin):
        FileFormatError: the restore file is truncated, corrupted or of unknown version;
            no RNG is changed.
    """

    def __init__(self, filepath: str | Path, *, restore_from: str | Path | None = None, restore: bool = True) -> None:
        super().__init__()
        self.filepath = str(filepath)
        if restore_from is None and "{epoch" not in self.filepath:
            restore_from = self.filepath
        self.restore_from = None if restore_from is None else Path(restore_from)
        self.restore = restore
        self.initial_epoch = 0
        self._epoch_variable = None

    @property
    def epoch_variable(self) -> Any:
        if self._epoch_variable is None:
            import tensorflow as tf

            self._epoch_variable = tf.Variable(self.initial_epoch, dtype=tf.int64, trainable=False, name="fwd9m_epoch")
        return self._epoch_variable

    def on_train_begin(self, logs: dict | None = None) -> None:
        if not (self.restore and self.restore_from and self.restore_from.exists()):
            return
        origin = shown(self.restore_from)
        state = rng.from_bytes(_read_rng_file(self.restore_from), origin=origin)
        progress = state.pop(_PROGRESS, {"epoch": 0})
        model_state = state.pop(_MODEL, None)
        epoch = progress.get("epoch") if isinstance(progress, dict) else None
        if not (isinstance(epoch, int) and not isinstance(epoch, bool) and epoch >= 0) or not isinstance(
            model_state, (dict, type(None))
        ):
            from .errors import FileFormatError

            # checked before any RNG changes: this entry is read after the restore
            raise FileFormatError(
                f"{origin}: the epoch ({progress!r:.60}) or the model's seed generators "
                f"entry is malformed; no RNG was changed. Fix: point to a file written by "
                f"RngStateCheckpoint, or delete it to start afresh."
            )
        if model_state is not None:  # checked before any RNG changes
            gens = layer_generators(self.model)
            missing = sorted(set(model_state) - set(gens))
            if missing:
                from .errors import ConfigurationError

                raise ConfigurationError(
                    f"{self.restore_from}: seed generators {missing} are not in this model "
                    f"(it has {sorted(gens)}); build the same model before fit()."
                )
        _restore(state, False, origin)  # a state its generator refuses: FileFormatError, nothing changed
        if model_state is not None:
            set_layer_state(self.model, model_state)
        self.initial_epoch = int(progress["epoch"])
        if self._epoch_variable is not None:
            self._epoch_variable.assign(self.initial_epoch)
        keras_initial = getattr(self.model, "_initial_epoch", None)  # BackupAndRestore's
        if keras_initial is not None and keras_initial != self.initial_epoch:
            logger.warning(
                "RNG state is from epoch %d but training resumes at epoch %s; "
                "the random streams will not match an uninterrupted run",
                self.initial_epoch,
                keras_initial,
            )
        logger.info("RngStateCheckpoint: restored RNG state of epoch %d from %s", self.initial_epoch, self.restore_from)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        state = rng.capture_rng_state()
        state[_MODEL] = layer_state(self.model)
        state[_PROGRESS] = {"epoch": epoch + 1}
        rng.save_rng_state(self.filepath.format(epoch=epoch + 1), state)
