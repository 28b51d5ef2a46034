"""Digest throughput against a plain sum over the same bytes on the same device.

Target: a digest costs at most 2x a plain sum (throughput >= 0.5x). The plain sum of
each framework is its own reduction (``torch.sum``, ``tf.reduce_sum``, ``numpy.sum``),
timed in the same run, interleaved (see ``_harness.py``). On a CUDA machine the torch
device path (:func:`fwd9m.torch._digest.partial`) is measured against
``torch.sum`` on the GPU as well.
"""

from __future__ import annotations

from _harness import Case


def cases(quick: bool):
    import numpy as np

    from fwd9m import fingerprint as fp
    from fwd9m.tensorflow import _digest as tf_dg
    from fwd9m.torch import _digest as torch_dg

    n = (1 << 20) if quick else (1 << 23)  # float32 elements: 4 MiB / 32 MiB
    repeat = 5 if quick else 9
    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    out = [
        Case(
            f"numpy_digest {a.nbytes >> 20} MiB",
            lambda: a.sum(),
            lambda: fp.numpy_digest(a),
            baseline_name="numpy.sum",
            target=2.0,
            repeat=repeat,
            note="int64 multiply-accumulate per 4-byte word vs a float32 SIMD sum",
        )
    ]
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        t = torch.from_numpy(a.copy())
        out.append(
            Case(
                f"torch_digest cpu {a.nbytes >> 20} MiB",
                lambda: t.sum(),
                lambda: torch_dg.digest(t),
                baseline_name="torch.sum",
                target=2.0,
                repeat=repeat,
                note="CPU tensors: zero-copy NumPy view",
            )
        )
        out.append(
            Case(
                f"torch_partial cpu (device path) {a.nbytes >> 20} MiB",
                lambda: t.sum(),
                lambda: torch_dg.partial(t)[0].item(),
                baseline_name="torch.sum",
                repeat=repeat,
                note="the accelerator code path, run on CPU: no target",
            )
        )
        if torch.cuda.is_available():
            g = t.cuda()

            def gsum():
                g.sum()
                torch.cuda.synchronize()

            def gdig():
                torch_dg.partial(g)
                torch.cuda.synchronize()

            out.append(
                Case(
                    f"torch_partial cuda {a.nbytes >> 20} MiB",
                    gsum,
                    gdig,
                    baseline_name="torch.sum (cuda)",
                    target=2.0,
                    repeat=repeat,
                )
            )
    try:
        import tensorflow as tf
    except ImportError:
        tf = None
    if tf is not None:
        x = tf.constant(a)
        out.append(
            Case(
                f"tf_digest cpu {a.nbytes >> 20} MiB",
                lambda: tf.reduce_sum(x).numpy(),
                lambda: tf_dg.digest(x),
                baseline_name="tf.reduce_sum",
                target=2.0,
                repeat=repeat,
            )
        )
    return out
