"""The environment fingerprint: everything outside the code that can change numerics.

``collect()`` returns a JSON-ready dict (schema :data:`SCHEMA`, version
:data:`SCHEMA_VERSION`); ``diff(a, b)`` lists the differences that can change results,
most likely culprits first, each with a one-line reason. Collecting imports no
framework unless ``import_frameworks=True`` (versions come from package metadata).
Check reports and debug traces embed the same dict.
"""

from __future__ import annotations

import importlib.metadata as _md
import json
import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import _frameworks
from ._ranks import rank_info
from .errors import FileFormatError

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "collect",
    "diff",
    "Difference",
    "load",
    "dump",
    "render_text",
    "render_diff",
    "DETERMINISM_ENV_VARS",
    "THREAD_ENV_VARS",
]

SCHEMA = "fwd9m.environment"
SCHEMA_VERSION = 1

#: Environment variables that change which kernels run or how they are seeded.
DETERMINISM_ENV_VARS = (
    "PYTHONHASHSEED",
    "TF_DETERMINISTIC_OPS",
    "TF_CUDNN_DETERMINISTIC",
    "TF_CUDNN_USE_FRONTEND",
    "TF_CUDNN_USE_AUTOTUNE",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_XLA_FLAGS",
    "TF_USE_LEGACY_KERAS",
    "TF_GPU_THREAD_MODE",
    "TF_ENABLE_AUTO_MIXED_PRECISION",
    "CUBLAS_WORKSPACE_CONFIG",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_CUDNN_V8_API_DISABLED",
    "TORCHINDUCTOR_MAX_AUTOTUNE",
    "XLA_FLAGS",
    "JAX_ENABLE_X64",
    "JAX_DEFAULT_PRNG_IMPL",
    "JAX_THREEFRY_PARTITIONABLE",
    "JAX_PLATFORMS",
    "HOROVOD_FUSION_THRESHOLD",
    "HOROVOD_CYCLE_TIME",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "KERAS_BACKEND",
    "FWD9M_SEED",
)
#: Environment variables that set thread counts of numerical libraries.
THREAD_ENV_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "OPENBLAS_CORETYPE",
    "MKL_CBWR",
    "KMP_AFFINITY",
)
#: Container markers: NGC images set these (NVIDIA NGC container documentation).
CONTAINER_ENV_VARS = (
    "NVIDIA_TENSORFLOW_VERSION",
    "NVIDIA_PYTORCH_VERSION",
    "PYTORCH_VERSION",
    "NVIDIA_BUILD_ID",
    "CUDA_VERSION",
    "CUDNN_VERSION",
    "NCCL_VERSION",
)
#: Distributions whose versions can change numerics.
PACKAGES = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-gpu",
    "tf-keras",
    "keras",
    "torch",
    "torchvision",
    "jax",
    "jaxlib",
    "jax-cuda12-plugin",
    "flax",
    "optax",
    "numpy",
    "scipy",
    "horovod",
    "nvidia-cudnn-cu12",
    "nvidia-cublas-cu12",
    "nvidia-nccl-cu12",
    "intel-extension-for-pytorch",
    "tensorrt",
    "framework-determinism",
)
_CPU_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512_bf16",
    "avx512_vnni",
    "amx_bf16",
    "amx_tile",
    "f16c",
    "asimd",
    "sve",
)


def _cpu() -> dict[str, Any]:
    info: dict[str, Any] = {
        "machine": platform.machine(),
        "model": platform.processor() or None,
        "flags": [],
        "logical_cores": os.cpu_count(),
    }
    try:
        info["usable_cores"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        info["usable_cores"] = os.cpu_count()
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return info
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Model", "CPU part") and not info.get("_model_seen"):
            info["model"] = value.strip()
            info["_model_seen"] = True
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    info.pop("_model_seen", None)
    info["flags"] = sorted(f for f in _CPU_FLAGS if f in flags)
    return info


def _gpus(timeout: float = 5.0) -> list[dict[str, Any]]:
    """GPUs from ``nvidia-smi`` if it is on PATH; [] otherwise. Never raises."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    fields = "name,driver_version,compute_cap,memory.total"
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={fields}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 4:
            gpus.append(dict(zip(("name", "driver", "compute_capability", "memory"), parts)))
    return gpus


def _packages() -> dict[str, str]:
    versions = {}
    for dist in PACKAGES:
        try:
            versions[dist] = _md.version(dist)
        except _md.PackageNotFoundError:
            pass
    return versions


def _framework_runtime(name: str) -> dict[str, Any]:
    """What an imported framework says about itself: threads, CUDA, cuDNN, devices
    (:meth:`fwd9m._backend.Backend.runtime_info`)."""
    try:
        return _frameworks.backend(name).runtime_info()
    except Exception as exc:  # a broken install is itself information
        return {"error": f"{type(exc).__name__}: {exc}"}


def collect(import_frameworks: bool = False, frameworks: list[str] | None = None) -> dict[str, Any]:
    """Collect the environment fingerprint.

    Args:
        import_frameworks: also import each installed framework (or those named in
            ``frameworks``) and ask it for threads, CUDA/cuDNN versions and devices.
            Importing TensorFlow takes seconds; the default reads package metadata only.
        frameworks: restrict ``import_frameworks`` to these names
            (``tensorflow``, ``keras``, ``torch``, ``jax``).

    Returns:
        A JSON-serialisable dict with keys ``schema``, ``schema_version``, ``python``,
        ``os``, ``cpu``, ``gpus``, ``packages``, ``env`` (determinism variables),
        ``threads`` (thread variables), ``container`` and ``frameworks`` (runtime
        details of imported frameworks; always includes the ones already imported).
    """
    names = set(_frameworks.imported())
    if import_frameworks:
        names |= {
            n
            for n in _frameworks.resolve(frameworks or list(_frameworks.FRAMEWORKS))
            if _frameworks.installed_version(n)
        }
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "os": {
            "system": platform.system(),
            "release": platform.release(),
            "libc": " ".join(platform.libc_ver()).strip() or None,
        },
        "cpu": _cpu(),
        "gpus": _gpus(),
        "packages": _packages(),
        "env": {k: os.environ.get(k) for k in DETERMINISM_ENV_VARS},
        "threads": {k: os.environ.get(k) for k in THREAD_ENV_VARS},
        "container": {k: os.environ[k] for k in CONTAINER_ENV_VARS if k in os.environ},
        "interconnect": _interconnect(),
        "frameworks": _runtimes(sorted(names)),
    }


#: prefixes of the variables that configure collectives: NCCL's (algorithm, protocol,
#: channels, NVLS, topology, network: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html),
#: UCX's and Open MPI's MCA parameters
_INTERCONNECT_PREFIXES = ("NCCL_", "UCX_", "OMPI_MCA_", "TORCH_NCCL_")


def _interconnect() -> dict[str, Any]:
    """How the ranks of a distributed job talk: the collectives' variables, the world
    size and launcher, NCCL's version (when torch with CUDA is already imported), the
    GPU topology (``nvidia-smi topo -m`` where it exists)."""
    out: dict[str, Any] = {"env": {k: v for k, v in sorted(os.environ.items()) if k.startswith(_INTERCONNECT_PREFIXES)}}
    try:
        info = rank_info()
        out.update(world_size=info.world_size, local_world_size=info.local_world_size, launcher=info.source)
    except Exception:  # noqa: BLE001 - a misconfigured launcher: the rest still holds
        pass
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            out["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:  # noqa: BLE001
        pass
    out["topology"] = _gpu_topology()
    return out


def _gpu_topology() -> str | None:
    """``nvidia-smi topo -m`` (the links between GPUs, NICs and CPUs), None without it."""
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        done = subprocess.run([smi, "topo", "-m"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def _runtimes(names: list[str]) -> dict[str, dict[str, Any]]:
    """:func:`_framework_runtime` for each name; a framework imported here for the first
    time starts with its native start-up log lines silenced (they are not about the
    user's program, and would mix with ``fwd9m env``'s output)."""
    from ._quiet import QuietNativeStderr

    out = {}
    for n in names:
        if n in sys.modules:
            out[n] = _framework_runtime(n)
        else:
            with QuietNativeStderr():
                out[n] = _framework_runtime(n)
    return out


@dataclass(frozen=True)
class Difference:
    """One difference between two fingerprints. ``rank``: lower is a likelier culprit."""

    key: str
    a: Any
    b: Any
    rank: int
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# (key prefix, rank, reason). The first matching prefix wins; order matters.
_REASONS: tuple[tuple[str, int, str], ...] = (
    (
        "env.PYTHONHASHSEED",
        0,
        "string hashing, and so set and dict-of-set iteration order, "
        "changes between processes unless PYTHONHASHSEED is fixed",
    ),
    ("env.TF_DETERMINISTIC_OPS", 0, "selects deterministic TensorFlow GPU kernels"),
    ("env.TF_CUDNN_DETERMINISTIC", 0, "selects deterministic cuDNN algorithms in TensorFlow"),
    ("env.CUBLAS_WORKSPACE_CONFIG", 0, "cuBLAS is only deterministic with a fixed workspace config"),
    ("env.XLA_FLAGS", 0, "XLA flags switch deterministic GPU ops and autotuning on or off"),
    ("env.TF_XLA_FLAGS", 0, "XLA auto-clustering changes which kernels run"),
    ("env.FWD9M_SEED", 0, "the exported global seed differs"),
    ("frameworks.torch.deterministic_algorithms", 0, "torch deterministic algorithms switched differently"),
    ("frameworks.tensorflow.op_determinism", 0, "TensorFlow op determinism switched differently"),
    ("frameworks.torch.cudnn", 1, "cuDNN settings choose different convolution algorithms"),
    ("env.TF_ENABLE_ONEDNN_OPTS", 1, "oneDNN kernels round differently from the Eigen ones"),
    ("env.HOROVOD_FUSION_THRESHOLD", 1, "tensor fusion changes the reduction order of all-reduce"),
    ("env.NVIDIA_TF32_OVERRIDE", 1, "TF32 matmul/conv changes precision on Ampere and newer GPUs"),
    ("interconnect.world_size", 0, "another number of ranks reduces gradients in another order"),
    (
        "interconnect.env.NCCL_",
        1,
        "NCCL's settings choose the collective's algorithm, protocol and channels, and with them "
        "the order in which values are summed",
    ),
    ("interconnect.", 1, "the ranks talk over another topology or launcher: collectives can sum in another order"),
    ("env.", 2, "a determinism-relevant environment variable differs"),
    ("threads.", 1, "thread counts change how reductions are split, and so the rounding"),
    ("frameworks.", 1, "the framework reports a different runtime configuration"),
    ("packages.", 1, "a different library version can use different kernels"),
    ("gpus", 1, "a different GPU or driver runs different kernels"),
    ("cpu.flags", 1, "different vector instructions (AVX2, AVX-512, FMA) round differently"),
    ("cpu.model", 2, "a different CPU model can select different kernels"),
    ("cpu.", 2, "core count changes default thread pools and reduction splits"),
    ("container", 2, "a different container image ships different library builds"),
    ("python.version", 2, "a different Python version"),
    ("os.", 3, "a different operating system or C library (math functions round differently)"),
)
_IGNORED = ("python.executable",)


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(d, dict):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: d}


def diff(a: dict[str, Any], b: dict[str, Any]) -> list[Difference]:
    """Differences between fingerprints ``a`` and ``b`` that can change results,
    sorted most likely culprit first (then by key). Lists (CPU flags, GPUs) compare whole."""
    fa, fb = _flatten(a), _flatten(b)
    out = []
    for key in sorted(set(fa) | set(fb)):
        if key in ("schema", "schema_version") or key in _IGNORED:
            continue
        va, vb = fa.get(key), fb.get(key)
        if va == vb:
            continue
        rank, reason = 3, "differs"
        for prefix, r, why in _REASONS:
            if key.startswith(prefix):
                rank, reason = r, why
                break
        out.append(Difference(key, va, vb, rank, reason))
    out.sort(key=lambda d: (d.rank, d.key))
    return out


def dump(fingerprint: dict[str, Any]) -> str:
    return json.dumps(fingerprint, indent=2, sort_keys=True)


#: a fingerprint is a few KiB; a file this large is not one (and would be read whole)
MAX_FINGERPRINT_BYTES = 16 << 20


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a fingerprint written by ``fwd9m env --format json``.

    Raises:
        FileFormatError: the file is missing, not a regular file (a pipe or device is
            refused before reading), larger than :data:`MAX_FINGERPRINT_BYTES`, not JSON,
            not a fingerprint, or written by a newer schema version.
    """
    from ._files import read_regular_file, shown

    p = Path(path)
    name = shown(p)
    raw = read_regular_file(
        p, "fingerprint", "write one with: fwd9m env --format json > env.json", MAX_FINGERPRINT_BYTES
    )
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # ValueError: bad UTF-8 or JSON, huge ints
        why = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else str(exc)
        raise FileFormatError(
            f"{name}: not a JSON environment fingerprint ({why}); write one with: fwd9m env --format json > env.json"
        ) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise FileFormatError(
            f"{name}: JSON, but not an environment fingerprint "
            f'(expected "schema": "{SCHEMA}"); '
            f"write one with: fwd9m env --format json"
        )
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise FileFormatError(
            f"{name}: fingerprint without a valid schema_version ({version!r}); "
            f"write it again with: fwd9m env --format json"
        )
    if version > SCHEMA_VERSION:
        raise FileFormatError(
            f"{name}: fingerprint schema version {version!r}; this fwd9m reads "
            f"versions 1..{SCHEMA_VERSION}: upgrade fwd9m "
            f"(pip install -U framework-determinism)"
        )
    return data


def render_text(fp: dict[str, Any]) -> str:
    """A human summary of a fingerprint, one fact a line."""
    lines = [
        f"python     {fp['python']['implementation']} {fp['python']['version']}",
        f"os         {fp['os']['system']} {fp['os']['release']}",
        f"cpu        {fp['cpu'].get('model')} ({fp['cpu'].get('machine')}), "
        f"{fp['cpu'].get('usable_cores')}/{fp['cpu'].get('logical_cores')} cores usable, "
        f"flags: {' '.join(fp['cpu'].get('flags') or []) or '-'}",
    ]
    for g in fp.get("gpus") or []:
        lines.append(f"gpu        {g.get('name')} (compute {g.get('compute_capability')}, driver {g.get('driver')})")
    if not fp.get("gpus"):
        lines.append("gpu        none found (nvidia-smi absent or no device)")
    for name, ver in sorted(fp.get("packages", {}).items()):
        lines.append(f"package    {name}=={ver}")
    for name, info in sorted(fp.get("frameworks", {}).items()):
        detail = ", ".join(f"{k}={v}" for k, v in info.items() if k != "version")
        lines.append(f"runtime    {name} {info.get('version', '')}: {detail}")
    for k, v in fp.get("container", {}).items():
        lines.append(f"container  {k}={v}")
    for section in ("env", "threads"):
        for k, v in fp.get(section, {}).items():
            if v is not None:
                lines.append(f"{section:<10} {k}={v}")
    unset = [k for k, v in fp.get("env", {}).items() if v is None]
    if unset:
        lines.append(f"unset      {' '.join(unset)}")
    return _one_fact_a_line(lines)


def _one_fact_a_line(lines: list[str]) -> str:
    """``lines`` for a terminal: values and keys come from the environment (a variable's
    value) or a fingerprint file, so control characters in them are shown escaped
    (``\\x1b``, ``\\n``): they can neither act on the terminal nor forge a line."""
    from .compare import escape_control

    return "\n".join(escape_control(line) for line in lines)


def render_diff(diffs: list[Difference]) -> str:
    if not diffs:
        return "no differences that can change results"
    from .compare import escape_control

    keys = [escape_control(d.key) for d in diffs]
    width = max(len(k) for k in keys)
    lines = []
    for key, d in zip(keys, diffs):
        lines += [f"{key:<{width}}  {d.a!r} -> {d.b!r}", f"{'':<{width}}  {d.reason}"]
    return _one_fact_a_line(lines)
