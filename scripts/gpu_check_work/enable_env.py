"""gpu-check workload: what the determinism settings are when a training script starts.

Run as ``fwd9m run --seed 0 enable_env.py`` (the settings come from ``fwd9m run``) or as
``enable_env.py --call`` (the script calls ``fwd9m.enable_determinism`` itself, before
its first CUDA call). Prints one JSON object: whether CUDA was initialised when the
settings were made, ``CUBLAS_WORKSPACE_CONFIG``, the switch, the cuDNN flags, and
whether a cuBLAS matrix product and a cuDNN convolution then run under the switch
(before PR 161749, torch raised on cuBLAS calls without the workspace variable).

The device is ``$FWD9M_GPU_CHECK_DEVICE`` (default ``cuda:0``); on ``cpu`` (dry run and
tests) the products run on CPU_STAND_IN_FOR_CUDA_DEVICE, the CPU, and
``torch.cuda.is_initialized()`` is read as is (False), with no other difference.
"""

from __future__ import annotations

import json
import os
import sys

import torch

#: on the CPU the CUDA device is stood in for by the CPU: the same calls, run there
CPU_STAND_IN_FOR_CUDA_DEVICE = "cpu"
DEVICE = os.environ.get("FWD9M_GPU_CHECK_DEVICE", "cuda:0")
if not DEVICE.startswith("cuda"):
    DEVICE = CPU_STAND_IN_FOR_CUDA_DEVICE


def main() -> None:
    state = {"cuda_initialised_before": torch.cuda.is_initialized(), "changes": None}
    if "--call" in sys.argv:
        import fwd9m

        changes = fwd9m.enable_determinism(seed=0)
        state["changes"] = [str(getattr(c, "what", c)) for c in changes]
    state.update(
        CUBLAS_WORKSPACE_CONFIG=os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        PYTHONHASHSEED=os.environ.get("PYTHONHASHSEED"),
        switch=torch.are_deterministic_algorithms_enabled(),
        cudnn_deterministic=torch.backends.cudnn.deterministic,
        cudnn_benchmark=torch.backends.cudnn.benchmark,
    )
    x = torch.randn(64, 64, device=DEVICE)
    try:
        conv = torch.nn.Conv2d(3, 4, 3).to(DEVICE)
        (x @ x).sum().item()
        conv(torch.randn(2, 3, 16, 16, device=DEVICE)).sum().backward()
        state["kernels_ran"] = "ok"
    except RuntimeError as exc:
        state["kernels_ran"] = str(exc).splitlines()[0]
    state["device"] = str(x.device)
    json.dump(state, sys.stdout)
    print()


if __name__ == "__main__":
    main()
