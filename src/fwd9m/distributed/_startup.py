"""What ``fwd9m run --check-replicas N`` and ``--record-ranks DIR`` ask of each process,
through the environment, once torch is enabled there: the start-up hook
(``fwd9m/_sitecustomize``) and ``fwd9m cost``'s child hand :func:`after_enable` to
:func:`fwd9m._runtime.bootstrap.install`, which calls it after each framework it
enables (``_runtime`` is below ``distributed``: it is given the function, it does not
import it).
"""

from __future__ import annotations

import os

from ._debug import ENV_RECORD_RANKS, record_from_env
from ._replicas import ENV_CHECK_REPLICAS, install_from_env

__all__ = ["after_enable"]


def after_enable(framework: str) -> None:
    """With torch: the replica check of :data:`ENV_CHECK_REPLICAS` and the per-rank
    trace of :data:`ENV_RECORD_RANKS`, each when its variable is set."""
    if framework != "torch":
        return
    if os.environ.get(ENV_CHECK_REPLICAS):  # fwd9m run --check-replicas
        install_from_env()
    if os.environ.get(ENV_RECORD_RANKS):  # fwd9m run --record-ranks
        record_from_env()
