"""Writes one file of each kind fwd9m check reads tensor by tensor, plus a text file,
an opaque binary file and a damaged ``.npy``. With ``--random``, the tensor ``w`` (and
everything derived from it) is drawn without a seed, so it differs between runs."""
import json
import os
import sys

import numpy as np

rng = np.random.default_rng(None if "--random" in sys.argv else 0)
w = rng.standard_normal((4, 3)).astype(np.float32)
b = np.arange(3, dtype=np.int64)
os.makedirs("out", exist_ok=True)
np.save("out/w.npy", w)
np.savez("out/params.npz", w=w, b=b)
try:  # safetensors' own writer, if installed; the reader in fwd9m needs no framework
    from safetensors.numpy import save_file
    save_file({"w": w, "b": b}, "out/params.safetensors")
except ImportError:
    pass
try:
    import h5py
    with h5py.File("out/params.h5", "w") as f:
        f["layer/w"] = w
        f["layer/b"] = b
except ImportError:
    pass
with open("out/metrics.json", "w") as f:
    json.dump({"loss": float(w.sum()), "step": 3}, f)
with open("out/blob.bin", "wb") as f:
    f.write(w.tobytes())
with open("out/damaged.npy", "wb") as f:
    f.write(b"\x93NUMPY garbage" + w.tobytes()[:5])
print("saved")
