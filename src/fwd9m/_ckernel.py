"""Steps 1-3 of :mod:`fwd9m.fingerprint` (the partial sum ``S``) in C, built on first use.

The NumPy path widens every 32-bit word to 64 bits and multiplies in a generic loop
(0.7-1.2 ns a word measured on the shared 2-core machine, 512 KiB arrays); this kernel
reads the bytes once, in place, with no temporary (0.24 ns a word there with AVX2, 0.09 with AVX-512; the step
figures are in ``benchmarks/bench_steps.py``). It computes exactly the integer arithmetic of the NumPy path (64-bit
products and sums wrapping modulo 2**64, unsigned in C, so no overflow is undefined),
so both give the same ``S`` for the same bytes (``tests/test_fingerprint.py``).

The library is compiled once per machine with the system C compiler (``cc``/``gcc``/
``clang``) into the user's cache folder (``$XDG_CACHE_HOME/fwd9m`` or ``~/.cache/fwd9m``),
named by a hash of its source, the compiler and the platform, written to a temporary
name and renamed into place, so concurrent processes never load a half-written file.
On x86-64 it carries an AVX-512 (``x86-64-v4``, where the compiler knows that level),
an AVX2 and a baseline version of the loop and picks one at load (GCC/Clang
``target_clones``), so a cache folder shared between machines never runs an
instruction a CPU lacks. The AVX-512 version multiplies 64-bit lanes natively
(``vpmullq``): 0.09 ns a word against 0.24 for AVX2 (a 4 MiB buffer on the shared
2-core AMD EPYC machine). Without a compiler, when the build fails, or with
``FWD9M_NO_CKERNEL=1``, :func:`kernel` returns None and callers use NumPy.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["ENV_DISABLE", "digests", "kernel", "partial"]

#: set to 1 to never build or load the kernel (NumPy path only)
ENV_DISABLE = "FWD9M_NO_CKERNEL"

_SOURCE = r"""
#include <stdint.h>
#include <string.h>

#define ROW 1024
#define GOLDEN 0x9E3779B97F4A7C15ULL
#define ROW_OFFSET 0x632BE59BD9B4E5DULL

#if defined(FWD9M_CLONES_V4)
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#elif defined(FWD9M_CLONES)
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif

/* sum over k < n of (sign-extended word k) * m[k], mod 2**64; p need not be aligned */
CLONES static uint64_t row_sum(const unsigned char *p, int64_t n, const uint64_t *m) {
    uint64_t s = 0;
    for (int64_t k = 0; k < n; k++) {
        int32_t w;
        memcpy(&w, p + 4 * k, 4);
        s += (uint64_t)(int64_t)w * m[k];
    }
    return s;
}

/* S of the nbytes bytes at p (zero-padded to whole words), its rows numbered from row0 */
uint64_t fwd9m_partial(const unsigned char *p, int64_t nbytes, const uint64_t *m, int64_t row0) {
    int64_t words = nbytes / 4, tail = nbytes % 4;
    uint64_t total = 0, j = (uint64_t)row0;
    int64_t k = 0;
    for (; k + ROW <= words; k += ROW, j++)
        total += row_sum(p + 4 * k, ROW, m) * ((j * GOLDEN + ROW_OFFSET) | 1ULL);
    if (k < words || tail) {
        uint64_t s = row_sum(p + 4 * k, words - k, m);
        if (tail) {
            int32_t w = 0;
            memcpy(&w, p + 4 * words, (size_t)tail); /* little-endian: the low bytes */
            s += (uint64_t)(int64_t)w * m[words - k];
        }
        total += s * ((j * GOLDEN + ROW_OFFSET) | 1ULL);
    }
    return total;
}

/* step 4: fmix64(S ^ (nbytes * LEN_MULT)), as fwd9m.fingerprint.finalize */
static uint64_t finalize(uint64_t s, int64_t nbytes) {
    uint64_t x = s ^ ((uint64_t)nbytes * 0xC2B2AE3D27D4EB4FULL);
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ULL;
    return x ^ (x >> 33);
}

/* the digest of each of count byte strings (addresses and lengths), into out */
void fwd9m_digests(int64_t count, const uint64_t *ptrs, const int64_t *nbytes, const uint64_t *m, uint64_t *out) {
    for (int64_t i = 0; i < count; i++)
        out[i] = finalize(fwd9m_partial((const unsigned char *)(uintptr_t)ptrs[i], nbytes[i], m, 0), nbytes[i]);
}
"""

_state: dict[str, Any] = {}


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "fwd9m")


def _compiler() -> str | None:
    import shutil

    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _build(cc: str, path: str) -> None:
    """Compile the library to ``path`` (atomically); raises on failure."""
    import platform
    import subprocess
    import tempfile

    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as tmp:
        src = os.path.join(tmp, "digest.c")
        with open(src, "w") as f:
            f.write(_SOURCE)
        out = os.path.join(tmp, "digest.so")
        base = [cc, "-O3", "-shared", "-fPIC", "-o", out, src]
        x86 = platform.machine().lower() in ("x86_64", "amd64")
        done = None
        # an AVX-512 (x86-64-v4: 64-bit vector multiplies) clone where the compiler
        # knows that level (GCC 12+), else AVX2 and baseline clones, else the plain loop
        for flags in [["-DFWD9M_CLONES_V4"], ["-DFWD9M_CLONES"], []] if x86 else [[]]:
            done = subprocess.run(base[:1] + flags + base[1:], capture_output=True, timeout=120)
            if done.returncode == 0:
                break
        if done is None or done.returncode:
            raise OSError(f"{cc} failed: {(done.stderr if done else b'').decode(errors='replace')[-300:]}")
        os.replace(out, path)


def kernel():
    """The loaded library (ctypes), built on first use; None when unavailable (no
    compiler, a failed build, or :data:`ENV_DISABLE`). Never raises."""
    if "lib" in _state:
        return _state["lib"]
    lib = None
    if os.environ.get(ENV_DISABLE, "") not in ("1", "true", "yes") and sys.byteorder == "little":
        try:
            lib = _load()
        except Exception as exc:  # noqa: BLE001 - the NumPy path is always there
            from ._log import logger

            logger.debug("fwd9m: compiled digest kernel unavailable (%s); using NumPy", exc)
            lib = None
    _state["lib"] = lib
    return lib


def _load():
    import ctypes
    import hashlib
    import platform

    cc = _compiler()
    if cc is None:
        return None
    tag = hashlib.sha256(f"{_SOURCE}\0{cc}\0{platform.platform()}\0{platform.machine()}".encode()).hexdigest()[:16]
    path = os.path.join(_cache_dir(), f"digest-{tag}.so")
    if not os.path.exists(path):
        _build(cc, path)
    lib = ctypes.CDLL(path)
    i64, u64p = ctypes.c_int64, ctypes.c_void_p
    lib.fwd9m_partial.argtypes = [ctypes.c_void_p, i64, u64p, i64]
    lib.fwd9m_partial.restype = ctypes.c_uint64
    lib.fwd9m_digests.argtypes = [i64, u64p, u64p, u64p, u64p]
    lib.fwd9m_digests.restype = None
    return lib


#: ``M``'s source, :func:`fwd9m.fingerprint.word_multipliers`: the digest's definition
#: sits above this kernel and hands it down when it loads (:func:`use_multipliers`)
_multipliers: list[Callable[[], Any]] = []


def use_multipliers(source: Callable[[], Any]) -> None:
    """Register where ``M`` comes from (called once by :mod:`fwd9m.fingerprint`)."""
    _multipliers[:] = [source]


def _m_address() -> int:
    """The address of ``M`` (:func:`fwd9m.fingerprint.word_multipliers`, a read-only
    array the cache keeps alive)."""
    address = _state.get("M")
    if address is None:
        address = _state["M"] = int(_multipliers[0]().ctypes.data)
    return address


def partial(address: int, nbytes: int, row0: int = 0) -> int:
    """``S`` (unsigned) of ``nbytes`` bytes at ``address``, rows numbered from ``row0``.
    The caller keeps the memory alive and unchanged during the call, and checks
    :func:`kernel` first."""
    return _state["lib"].fwd9m_partial(address, nbytes, _m_address(), row0)


def digests(addresses: list[int], nbytes: list[int]) -> list[int]:
    """The digest (steps 1-4) of each byte string, in one call (the GIL is released).
    The caller keeps the memory alive and unchanged during the call."""
    import numpy as np

    ptrs = np.array(addresses, dtype=np.uint64)
    lens = np.array(nbytes, dtype=np.int64)
    out = np.empty(len(addresses), dtype=np.uint64)
    _state["lib"].fwd9m_digests(len(addresses), ptrs.ctypes.data, lens.ctypes.data, _m_address(), out.ctypes.data)
    return out.tolist()
