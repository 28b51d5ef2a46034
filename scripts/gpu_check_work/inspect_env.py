"""gpu-check: what this interpreter holds. Prints one JSON object; imports torch and jax
(when present) to ask whether they see a CUDA GPU, and only looks TensorFlow up."""

from __future__ import annotations

import importlib.util
import json
import platform
import sys


def _torch() -> dict | None:
    try:
        import torch
    except Exception as exc:  # not installed, or broken
        return {"error": f"{type(exc).__name__}: {exc}"} if importlib.util.find_spec("torch") else None
    info = {"version": torch.__version__, "cuda_build": torch.version.cuda, "cuda": False}
    try:
        if torch.cuda.is_available():
            info.update(cuda=True, gpu=torch.cuda.get_device_name(0), devices=torch.cuda.device_count())
    except Exception as exc:
        info["cuda_error"] = str(exc).splitlines()[0]
    return info


def _jax() -> dict | None:
    try:
        import jax
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"} if importlib.util.find_spec("jax") else None
    info = {"version": jax.__version__, "cuda": False}
    for platform_name in ("cuda", "gpu"):
        try:
            gpus = jax.devices(platform_name)
        except Exception as exc:  # no such backend: RuntimeError
            info["cuda_error"] = str(exc).splitlines()[0][:200]
            continue
        info.update(cuda=bool(gpus), gpu=gpus[0].device_kind if gpus else None, cuda_error=None)
        break
    return info


def _version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def main() -> None:
    spec = importlib.util.find_spec("fwd9m")
    out = {
        "executable": sys.executable,
        "python": platform.python_version(),
        "torch": _torch(),
        "jax": _jax(),
        "tensorflow": _version("tensorflow") or _version("tensorflow-cpu"),
        "lightning": _version("lightning") or _version("pytorch-lightning"),
        "transformers": _version("transformers"),
        "pytest": _version("pytest"),
        "fwd9m": spec.origin if spec else None,
    }
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
