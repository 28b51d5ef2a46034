"""CUDA RNG state: capture never initialises CUDA; capture/restore of every device's
generator; seed_everything seeds CUDA too. Needs a CUDA GPU (auto-skipped without)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.gpu


def test_capture_does_not_initialise_cuda():
    code = (
        "import torch, fwd9m.rng as r; s = r.capture_rng_state();print('torch.cuda' in s, torch.cuda.is_initialized())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False"], out.stderr[-2000:]


def test_cuda_state_roundtrip_and_seed_everything():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    import fwd9m
    from fwd9m import rng

    fwd9m.seed_everything(3)
    a = torch.rand(4, device="cuda").cpu()
    fwd9m.seed_everything(3)
    assert torch.equal(torch.rand(4, device="cuda").cpu(), a)
    state = rng.capture_rng_state()
    assert len(state["torch.cuda"]["states"]) == torch.cuda.device_count()
    drop = torch.nn.Dropout(0.5).cuda()
    x = torch.ones(64, device="cuda")
    b = drop(x).cpu()
    rng.restore_rng_state(rng.from_bytes(rng.to_bytes(state)))
    assert torch.equal(drop(x).cpu(), b)
    bad = dict(state, **{"torch.cuda": {"states": state["torch.cuda"]["states"] * 2}})
    with pytest.raises(fwd9m.ConfigurationError, match="CUDA generators"):
        rng.restore_rng_state(bad)
