"""Name sets shared by several rules (qualified names after alias resolution)."""

from __future__ import annotations

from .._helpers import ALL_SEED_CALLS, FRAMEWORK_SEED_CALLS, NUMPY_SEED_CALLS, PYTHON_SEED_CALLS, SEED_CALLS

__all__ = [
    "ALL_SEED_CALLS",
    "FRAMEWORK_SEED_CALLS",
    "NUMPY_SEED_CALLS",
    "PYTHON_SEED_CALLS",
    "SEED_CALLS",
    "TF_SEED_CALLS",
    "TORCH_SEED_CALLS",
    "SWITCH_ON_CALLS",
    "uses_python_random",
    "uses_numpy_global_random",
    "seeds",
    "is_stateful_random",
]

TF_SEED_CALLS = (
    frozenset(
        {
            "tensorflow.random.set_seed",
            "tensorflow.set_random_seed",
            "tensorflow.compat.v1.set_random_seed",
            "tensorflow.compat.v1.random.set_random_seed",
        }
    )
    | ALL_SEED_CALLS
)
TORCH_SEED_CALLS = frozenset({"torch.manual_seed", "torch.random.manual_seed"}) | ALL_SEED_CALLS

#: calls that turn on a framework's determinism switch
SWITCH_ON_CALLS = frozenset(
    {
        "tensorflow.config.experimental.enable_op_determinism",
        "tensorflow.python.framework.config.enable_op_determinism",
        "torch.use_deterministic_algorithms",
        "fwd9m.enable_determinism",
        "fwd9m.enable.enable_determinism",
        "fwd9m.tensorflow.enable_determinism",
        "fwd9m.torch.enable_determinism",
        "fwd9m.jax.enable_determinism",
        "fwd9m.keras.enable_determinism",
    }
)

_PY_NOT_DRAWS = frozenset({"seed", "Random", "SystemRandom", "getstate", "setstate"})
_NP_NOT_DRAWS = frozenset(
    {
        "seed",
        "default_rng",
        "Generator",
        "RandomState",
        "SeedSequence",
        "PCG64",
        "PCG64DXSM",
        "Philox",
        "MT19937",
        "SFC64",
        "BitGenerator",
        "get_state",
        "set_state",
    }
)


def _draws(ctx, prefix: str, excluded) -> list:
    out = []
    for qn, calls in ctx.calls.items():
        if qn.startswith(prefix) and qn.count(".") == prefix.count(".") and qn.rsplit(".", 1)[1] not in excluded:
            out.extend(calls)
    return out


def uses_python_random(ctx) -> list:
    """Calls that draw from Python's global ``random`` generator."""
    return _draws(ctx, "random.", _PY_NOT_DRAWS)


def uses_numpy_global_random(ctx) -> list:
    """Calls that draw from NumPy's legacy global generator (``np.random.rand`` ...)."""
    return _draws(ctx, "numpy.random.", _NP_NOT_DRAWS)


def seeds(ctx, names) -> bool:
    """Whether the file calls one of ``names``; when they include a framework or
    seed-everything call, a seeding helper that amounts to one of them counts too (``fabric.seed_everything(s)``,
    ``RunConfig(tf_random_seed=s)``, a local function whose body seeds: see
    :func:`fwd9m.lint._flow.helper_seed_calls`)."""
    if any(ctx.calls.get(n) for n in names):
        return True
    if ctx.tree is None:
        return False
    from .._flow import helper_seed_calls

    return any(not got.isdisjoint(names) for _, got in helper_seed_calls(ctx))


_TF_STATEFUL = frozenset(
    {
        "uniform",
        "normal",
        "truncated_normal",
        "shuffle",
        "categorical",
        "gamma",
        "poisson",
        "multinomial",
        "random_uniform",
        "random_normal",
        "random_shuffle",
        "random_crop",
        "random_gamma",
        "random_poisson",
        "log_uniform_candidate_sampler",
        "uniform_candidate_sampler",
    }
)


def is_stateful_random(qn: str | None) -> bool:
    """A random op that draws from a global or hidden state (not a stateless op)."""
    if not qn:
        return False
    if qn.startswith(("tensorflow.random.", "tensorflow.compat.v1.random.")):
        return qn.rsplit(".", 1)[1] in _TF_STATEFUL
    if qn.startswith("tensorflow.image.random_"):
        return True
    if qn in (
        "tensorflow.random_uniform",
        "tensorflow.random_normal",
        "tensorflow.random_shuffle",
        "tensorflow.compat.v1.random_uniform",
        "tensorflow.compat.v1.random_normal",
    ):
        return True
    if qn.startswith("numpy.random.") and qn.count(".") == 2:
        return qn.rsplit(".", 1)[1] not in _NP_NOT_DRAWS
    if qn.startswith("random.") and qn.count(".") == 1:
        return qn.rsplit(".", 1)[1] not in _PY_NOT_DRAWS
    return False


def env_writes(ctx, node) -> list[tuple[str, object]]:
    """``(VARIABLE, node)`` for each environment variable that statement/call ``node``
    sets: ``os.environ["X"] = ...``, ``os.environ.setdefault("X", ...)``,
    ``os.environ.update({"X": ...})`` / ``update(X=...)``, ``os.putenv("X", ...)``."""
    import ast

    out = []
    if type(node) is ast.Assign:
        for t in node.targets:
            if type(t) is ast.Subscript and ctx.qualname(t.value) == "os.environ":
                key = t.slice
                if type(key) is ast.Constant and isinstance(key.value, str):
                    out.append((key.value, t))
    elif type(node) is ast.Call:
        f = node.func
        qn = ctx.qualname(f)
        if qn in ("os.putenv", "os.environ.setdefault", "os.environ.__setitem__") and node.args:
            k = node.args[0]
            if type(k) is ast.Constant and isinstance(k.value, str):
                out.append((k.value, node))
        elif qn == "os.environ.update":
            for a in node.args:
                if type(a) is ast.Dict:
                    out.extend((k.value, node) for k in a.keys if type(k) is ast.Constant and isinstance(k.value, str))
            out.extend((k.arg, node) for k in node.keywords if k.arg)
    return out
