"""Which determinism recipe a TensorFlow (and NGC container) version gets.

:func:`recipe` turns a TensorFlow version, and an NGC container version such as
``"22.01-tf2"``, into the list of steps :func:`fwd9m.tensorflow.enable_determinism`
applies. The version gates are the named constants below, each with the upstream
source that justifies it. Imports no framework.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from .. import _frameworks
from ..enable import cite
from ..errors import ConfigurationError, UnsupportedVersionError

# --- version gates -------------------------------------------------------------------
#: ``tf.config.experimental.enable_op_determinism`` added; replaces TF_DETERMINISTIC_OPS.
#: TF 2.8 release notes: https://github.com/tensorflow/tensorflow/releases/tag/v2.8.0
#: (also https://github.com/tensorflow/tensorflow/issues/53465).
OP_DETERMINISM_SINCE = Version("2.8")
#: ``TF_DETERMINISTIC_OPS`` honoured (cuDNN conv/max-pool, bias_add backprop), PR 31465:
#: https://github.com/tensorflow/tensorflow/issues/22398#issuecomment-607617463 and
#: https://github.com/tensorflow/tensorflow/pull/31465
DETERMINISTIC_OPS_ENV_SINCE = Version("2.1")
#: ``TF_CUDNN_DETERMINISTIC`` (TF 1.14, 1.15, 2.0) plus the bias_add patch: the oldest
#: versions fwd9m supports. Status page, "Auto-Tuning of cuDNN Convolution Algorithms":
#: https://github.com/NVIDIA/framework-reproducibility/blob/master/doc/d9m/tensorflow_status.md#auto-tuning
CUDNN_DETERMINISTIC_ENV_SINCE = Version("1.14")
#: Deterministic selection of deterministic cuDNN convolution algorithms was lost in
#: 2.5 and, per the maintainers, fixed for 2.9 ("still exists up to and including TF
#: version 2.8"; "This bug will be fixed for TF 2.9"); work-around TF_CUDNN_USE_FRONTEND=1:
#: https://github.com/tensorflow/tensorflow/issues/53771
CUDNN_FRONTEND_WORKAROUND = (Version("2.5"), Version("2.9"))
#: NGC TensorFlow containers honour TF_DETERMINISTIC_OPS from 19.06 (status page,
#: "NVIDIA GPU Cloud (NGC) TensorFlow Docker Images"):
#: https://github.com/NVIDIA/framework-reproducibility/blob/master/doc/d9m/tensorflow.md
NGC_SINCE = Version("19.06")
#: Newest TensorFlow this recipe was checked against (the version CI installs).
NEWEST_KNOWN = Version("2.21")

_STATUS = "https://github.com/NVIDIA/framework-reproducibility/blob/master/doc/d9m/tensorflow_status.md"
_OP_D9M_DOC = "https://www.tensorflow.org/api_docs/python/tf/config/experimental/enable_op_determinism"


@dataclass(frozen=True)
class Step:
    kind: str  #: "env" | "op_determinism" | "patch"
    name: str
    value: str
    why: str
    source: str


@dataclass
class Recipe:
    """What :func:`enable_determinism` will do for one TensorFlow (and NGC) version."""

    version: str
    ngc: str | None
    name: str  #: "op-determinism" | "env-deterministic-ops" | "cudnn-deterministic+patch"
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _parse(text: str, what: str) -> Version:
    try:
        v = Version(str(text).strip())
    except InvalidVersion:
        # NGC style "22.01-tf2" / "19.06-tf1-py3"
        head = str(text).strip().split("-", 1)[0]
        try:
            v = Version(head)
        except InvalidVersion:
            raise ConfigurationError(
                f"cannot parse {what} version {text!r}; expected e.g. '2.21.0' or, for NGC, '22.01-tf2'"
            ) from None
    return Version(".".join(str(p) for p in v.release[:2]))  # major.minor


def recipe(version: str | None = None, ngc: str | None = None) -> Recipe:
    """The determinism recipe for TensorFlow ``version`` (default: installed, from
    package metadata) inside NGC container ``ngc`` (default: the
    ``NVIDIA_TENSORFLOW_VERSION`` environment variable, e.g. ``"22.01-tf2"``).

    Imports nothing.

    Raises:
        UnsupportedVersionError: TensorFlow older than 1.14 (outside NGC >= 19.06) or
            an NGC container older than 19.06.
        ConfigurationError: an unparsable version, or TensorFlow not installed and no
            version given.
    """
    if version is None:
        version = _installed()
        if version is None:
            raise ConfigurationError("TensorFlow is not installed here; pass version=")
    if ngc is None:
        ngc = os.environ.get("NVIDIA_TENSORFLOW_VERSION") or None
    tf_v = _parse(version, "TensorFlow")
    ngc_v = _parse(ngc, "NGC container") if ngc else None
    notes: list[str] = []
    if tf_v > NEWEST_KNOWN:
        notes.append(
            f"TensorFlow {version} is newer than any version fwd9m knows "
            f"(newest checked: {NEWEST_KNOWN}); applied the newest recipe "
            f"(enable_op_determinism). Check `fwd9m catalog --framework tensorflow`."
        )
    steps: list[Step] = []
    if tf_v >= OP_DETERMINISM_SINCE:
        name = "op-determinism"
        steps.append(_op_determinism_step())
    elif tf_v >= DETERMINISTIC_OPS_ENV_SINCE or (ngc_v is not None and ngc_v >= NGC_SINCE):
        name = "env-deterministic-ops"
        steps.append(_deterministic_ops_step())
        if ngc_v is not None:
            notes.append(f"NGC container {ngc}: TF_DETERMINISTIC_OPS is honoured from NGC {NGC_SINCE} ({_STATUS})")
    elif ngc_v is not None:
        raise UnsupportedVersionError(
            f"NGC TensorFlow container {ngc} predates determinism support (NGC {NGC_SINCE}+).\n"
            f"Fix: use an NGC TensorFlow image >= {NGC_SINCE}, or stock TensorFlow >= "
            f"{OP_DETERMINISM_SINCE} with fwd9m.tensorflow.enable_determinism()"
        )
    elif tf_v >= CUDNN_DETERMINISTIC_ENV_SINCE:
        name = "cudnn-deterministic+patch"
        steps += _cudnn_patch_steps()
        notes.append(
            "TF 1.14-2.0: the segment-sum patch covers tf.math.segment_sum and "
            "unsorted_segment_sum called through the Python API only (not "
            "tf.gather gradients reduced inside tf.convert_to_tensor); see "
            f"{_STATUS}#segment-reduction"
        )
    else:
        raise UnsupportedVersionError(
            f"TensorFlow {version} is older than {CUDNN_DETERMINISTIC_ENV_SINCE}, the oldest "
            f"version with deterministic GPU op support ({_STATUS}).\n"
            f"Fix: pip install 'tensorflow>={OP_DETERMINISM_SINCE}' and call "
            f"fwd9m.tensorflow.enable_determinism(seed=...)"
        )
    steps += _frontend_steps(tf_v)
    return Recipe(str(version), ngc, name, steps, notes)


def _op_determinism_step() -> Step:
    """TF >= 2.8's switch: ``enable_op_determinism``."""
    return Step(
        "op_determinism",
        "tf.config.experimental.enable_op_determinism()",
        "True",
        "ops with nondeterministic kernels (GPU atomics, cuDNN "
        "autotuning, parallel tf.data) switch to deterministic ones or raise",
        cite("tensorflow.cudnn-autotune", "tensorflow.segment-reduction", _OP_D9M_DOC),
    )


def _deterministic_ops_step() -> Step:
    """TF 2.1-2.7's (and NGC >= 19.06's) switch: ``TF_DETERMINISTIC_OPS``."""
    return Step(
        "env",
        "TF_DETERMINISTIC_OPS",
        "1",
        "this TensorFlow's determinism switch (deterministic cuDNN convolution/max-pool and bias_add backprop)",
        cite(
            "tensorflow.bias-add-backprop",
            "tensorflow.cudnn-autotune",
            "https://github.com/tensorflow/tensorflow/pull/31465",
            _STATUS,
        ),
    )


def _cudnn_patch_steps() -> list[Step]:
    """TF 1.14-2.0: ``TF_CUDNN_DETERMINISTIC`` and fwd9m's bias_add and segment-sum patches."""
    return [
        Step(
            "env",
            "TF_CUDNN_DETERMINISTIC",
            "1",
            "deterministic cuDNN convolution and max-pool algorithms (TF 1.14-2.0 have no TF_DETERMINISTIC_OPS)",
            cite("tensorflow.cudnn-autotune", _STATUS + "#auto-tuning"),
        ),
        Step(
            "patch",
            "tf.nn.bias_add",
            "fwd9m broadcast-add",
            "BiasAddGrad reduces with CUDA atomics in TF < 2.1; a broadcast add "
            "back-propagates through a deterministic reduce_sum",
            cite("tensorflow.bias-add-backprop", _STATUS + "#bias-addition"),
        ),
        Step(
            "patch",
            "tf.math.segment_sum/unsorted_segment_sum",
            "fwd9m one-hot matmul",
            "segment sums use CUDA atomics on GPU in TF < 2.7",
            cite("tensorflow.segment-reduction", _STATUS + "#segment-reduction"),
        ),
    ]


def _frontend_steps(tf_v) -> list[Step]:
    """The cuDNN frontend switch, for the TensorFlow versions that need it (else none)."""
    lo, hi = CUDNN_FRONTEND_WORKAROUND
    if not lo <= tf_v < hi:
        return []
    return [
        Step(
            "env",
            "TF_CUDNN_USE_FRONTEND",
            "1",
            f"TF {lo}-{hi} lost deterministic selection of cuDNN convolution "
            "algorithms; the cuDNN frontend path restores it",
            cite("tensorflow.cudnn-autotune", "https://github.com/tensorflow/tensorflow/issues/53771"),
        ),
    ]


def _installed() -> str | None:
    tf = sys.modules.get("tensorflow")
    v = getattr(getattr(tf, "version", None), "VERSION", None) if tf is not None else None
    return v or _frameworks.installed_version("tensorflow")
