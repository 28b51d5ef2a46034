"""Turn a classified divergence into an explanation: catalog entries, likely causes, the
fix to paste. Op facts come from :mod:`fwd9m.catalog` (no op list is kept here)."""

from __future__ import annotations

import os
import re
from typing import Any

from .._log import logger
from ._compare import PYTHON_OPS
from ._compiled import COMPILED_NODE, XLA_NODE, compiled_culprit, xla_culprit

__all__ = ["explain"]

#: JAX has no global RNG: every random value comes from a key
#: (https://docs.jax.dev/en/latest/random-numbers.html)
_JAX_KEY = (
    "import jax\nkey = jax.random.key(0)   # a fixed seed, not the clock or an unseeded NumPy draw\n"
    "init_key, step_key = jax.random.split(key)   # a new key per use (split / fold_in)"
)

#: external kinds -> (headline, likely causes, catalog entry ids, fallback fix per framework)
_EXTERNAL: dict[str, tuple[str, list[str], list[str], dict[str, str]]] = {
    "rng": (
        "random-number generator state differs between the runs",
        [
            "the framework's global RNG is not seeded, or seeded differently (e.g. from the clock)",
            "a generator is consumed a different number of times before this op",
        ],
        ["torch.global-seed", "tensorflow.op-seed-counter", "python.time-seed"],
        {
            "torch": "import fwd9m\nfwd9m.seed_everything(0)  # or: torch.manual_seed(0) before any random op",
            "tensorflow": "import keras\nkeras.utils.set_random_seed(0)  # seeds Python, NumPy and TF",
            "jax": _JAX_KEY,
        },
    ),
    "seed": (
        "the seed of a random op (an initializer) differs between the runs",
        [
            "an unseeded initializer: Keras 3 initializers and layers draw their seeds from "
            "Keras' own SeedGenerator, which tf.random.set_seed does not seed",
            "Python's random module (used to make seeds) is not seeded",
        ],
        ["keras.seed-generator", "tensorflow.op-seed-counter"],
        {
            "tensorflow": "import keras\nkeras.utils.set_random_seed(0)  # seeds Python, NumPy, TF and Keras",
            "torch": "import fwd9m\nfwd9m.seed_everything(0)",
            "jax": _JAX_KEY,
        },
    ),
    "initializer": (
        "model parameters differ before their first use (unseeded initializer or different weights loaded)",
        [
            "the model was built before the RNG was seeded (or not seeded at all)",
            "weights were loaded from a different file/checkpoint",
        ],
        ["keras.seed-generator"],
        {
            "torch": "import fwd9m\nfwd9m.seed_everything(0)  # before building the model",
            "tensorflow": "import keras\nkeras.utils.set_random_seed(0)  # before building the model",
            "jax": _JAX_KEY,
        },
    ),
    "data": (
        "the input batch differs between the runs (data pipeline: order or content)",
        [
            "data shuffled with an unseeded generator (random.shuffle, np.random.permutation, "
            "DataLoader(shuffle=True) without generator=..., tf.data shuffle without seed)",
            "files listed in directory order (os.listdir / glob are unordered)",
            "DataLoader workers seeded differently, or augmentation with an unseeded RNG",
            "set/dict iteration order under a random PYTHONHASHSEED",
        ],
        [
            "torch.dataloader-worker-seeding",
            "tensorflow.data-shuffle-seed",
            "python.listdir-order",
            "python.set-iteration-order",
        ],
        {
            "torch": "import fwd9m, torch\nfwd9m.seed_everything(0)\n"
            "loader = torch.utils.data.DataLoader(ds, shuffle=True,\n"
            "    generator=torch.Generator().manual_seed(0))  # and sort file lists\n"
            "# and a seed for every generator the dataset holds: self.rng = np.random.default_rng(seed)",
            "tensorflow": "import keras\nkeras.utils.set_random_seed(0)\n"
            "ds = ds.shuffle(buffer_size, seed=0)  # and sort file lists",
            "jax": "import fwd9m, numpy as np\n"
            'batches = np.random.default_rng(fwd9m.derive_seed(0, "batches"))  '
            "# a seed for every NumPy generator\n# and sort file lists",
        },
    ),
    "hashseed": (
        "PYTHONHASHSEED: string hashing is salted per process, so set (and dict-of-set) "
        "iteration order changes the value",
        ["a set of strings is iterated to build ids, a vocabulary, a file list or batches"],
        ["python.hash-seed", "python.set-iteration-order"],
        {
            "torch": "export PYTHONHASHSEED=0   # before Python starts; or iterate sorted(the_set)",
            "tensorflow": "export PYTHONHASHSEED=0   # before Python starts; or iterate sorted(the_set)",
            "jax": "export PYTHONHASHSEED=0   # before Python starts; or iterate sorted(the_set)",
        },
    ),
    "python": (
        "a value built outside the framework (Python/NumPy) differs between the runs",
        [
            "Python's random or NumPy's global RNG is not seeded",
            "set or dict-of-set iteration order changes with PYTHONHASHSEED (random per process)",
            "a file read differs (directory order, a file changed between the runs)",
        ],
        ["python.hash-seed", "python.set-iteration-order", "python.listdir-order"],
        {
            "torch": "import fwd9m\nfwd9m.seed_everything(0)   # Python, NumPy, torch\n"
            "# and: export PYTHONHASHSEED=0, iterate sorted(set_), sorted(os.listdir(...))",
            "tensorflow": "import keras\nkeras.utils.set_random_seed(0)\n"
            "# and: export PYTHONHASHSEED=0, iterate sorted(set_), sorted(os.listdir(...))",
            "jax": "import fwd9m, numpy as np\nfwd9m.seed_everything(0)   # Python's random, NumPy's global RNG\n"
            'rng = np.random.default_rng(fwd9m.derive_seed(0, "name"))  # each Generator its own seed\n'
            "# and: export PYTHONHASHSEED=0, iterate sorted(set_), sorted(os.listdir(...))",
        },
    ),
}


#: torch data fix when the script's DataLoader has worker processes: each worker gets a
#: copy of the dataset and its generators; fwd9m.data.worker_init_fn reseeds them per
#: worker from the loader's seed (https://pytorch.org/docs/stable/notes/randomness.html#dataloader)
_TORCH_WORKERS_FIX = (
    "import fwd9m, fwd9m.data, torch\nfwd9m.seed_everything(0)\n"
    "loader = torch.utils.data.DataLoader(ds, shuffle=True, num_workers=N,\n"
    "    generator=torch.Generator().manual_seed(0),   # the shuffle order and the workers' seeds\n"
    "    worker_init_fn=fwd9m.data.worker_init_fn)     # reseeds generators the dataset holds\n"
    "#   (self.rng = np.random.default_rng(...)) in each worker, from that worker's seed\n"
    "# and sort file lists"
)

#: catalog entries and causes about string hashing or directory order: dropped once
#: reruns with a fixed PYTHONHASHSEED rule hash randomization out
_HASH_IDS = ("python.hash-seed", "python.set-iteration-order", "python.listdir-order")
#: verdicts of the hash-seed experiment (fwd9m._hashseed) that drop the hash-order advice
_NOT_HASH = ("ruled-out", "intermittent", "not-confirmed")

#: JAX: the entries shown for an external source (the torch/TF ids above do not apply)
_JAX_IDS = {
    "rng": ["jax.prng-key-reuse"],
    "seed": ["jax.prng-key-reuse"],
    "initializer": ["jax.prng-key-reuse"],
    "data": ["python.numpy-unseeded"],
    "python": ["python.numpy-unseeded"],
}

#: JAX without Keras: (headline, causes) of the external kinds whose general text speaks
#: of Keras' or TensorFlow's seeding (JAX has no global RNG: every draw comes from a key)
_JAX_TEXT = {
    "seed": (
        "the seed of a JAX PRNG key differs between the runs (every draw made with that key differs)",
        [
            "the key is made from a seed that changes per run: the clock, the process id, "
            "os.urandom, or an unseeded Python/NumPy draw",
            "Python's random module or NumPy's global RNG (used to make the seed) is not seeded",
        ],
    ),
    "rng": (
        "a JAX PRNG key differs between the runs",
        [
            "the key is made from a seed that changes per run (the clock, an unseeded draw)",
            "the key is split or folded a different number of times before this draw",
        ],
    ),
}

#: JAX: a jit op whose program input (``_jax.PROGRAM_META``) differs: a static argument
#: or a captured global changed the program (https://docs.jax.dev/en/latest/_autosummary/jax.jit.html,
#: https://docs.jax.dev/en/latest/notebooks/Common_Gotchas_in_JAX.html)
_JAX_PROGRAM_CAUSES = [
    "a static argument (static_argnums / static_argnames) has another value in each run: "
    "each value is compiled into its own program",
    "the jitted function reads a global or closed-over Python/NumPy value that differs between "
    "the runs: JAX bakes it into the program as a constant when it traces the function",
]
_JAX_PROGRAM_FIX = (
    "# a static argument, or a global the jitted function reads, must be the same in every run:\n"
    "lr = 0.01   # a fixed value, or one drawn from a seeded generator (below)\n"
    "# or pass it as a traced argument (not static), so it is an input of the call"
)

#: JAX: a host callback inside a culprit jit (``fwd9m.jax._recorder.CALLBACK_PRIMITIVES``)
_JAX_CALLBACK_FIX = (
    "import fwd9m, numpy as np\n"
    "# inside the callback: a seeded generator, not np.random.* or default_rng()\n"
    'rng = np.random.default_rng(fwd9m.derive_seed(0, "callback"))\n'
    "# or draw the noise with jax.random from a key passed to the jitted function"
)


def _jit_culprit(first, version: str | None, ha: dict, hashseed: str | None) -> dict[str, Any]:
    """A ``jit(NAME)`` call (:mod:`fwd9m.jax._recorder`) whose inputs agree and outputs
    differ: the ops inside it were not recorded one by one. Host callbacks inside it
    come first among the suspects (Python code run by the program)."""
    from ..jax._recorder import CALLBACK_PRIMITIVES

    dev = "gpu" if "gpu" in first.device or "cuda" in first.device else "cpu"
    cat = _catalog()
    suspects = [s for s in first.node.partition(":")[2].split(",") if s]  # _jax._program
    callbacks = [s for s in suspects if s in CALLBACK_PRIMITIVES]
    suspects = [s for s in suspects if s not in CALLBACK_PRIMITIVES]
    entries = []
    for s in suspects:
        entries += [
            e for e in _entries_for_op("jax", s, version, first.device) if e["id"] not in {x["id"] for x in entries}
        ]
    if callbacks:
        also = f"; inside it the catalog also lists {', '.join(suspects)}" if suspects else ""
        return _callback_culprit(
            first, callbacks, ha, hashseed, entries, "(ops inside a jit are recorded as one)" + also
        )
    inside = f"; inside it the catalog lists {', '.join(suspects)}" if suspects else ""
    if not entries and cat is not None:  # no listed suspect: what the catalog has for this device
        try:
            entries = [
                _entry_dict(e)
                for e in cat.query(framework="jax", device=dev, version=version)
                if e.kind in ("op", "compiler", "system")
            ]
        except Exception as exc:  # noqa: BLE001 - a catalog problem must not hide the finding
            logger.debug("catalog.query(jax) failed: %s", exc)
    return {
        "headline": f"{first.op} gave different outputs from identical inputs: an op inside this "
        f"compiled function is nondeterministic (ops inside a jit are recorded as one)"
        f"{inside}",
        "causes": list(_JIT_CAUSES),
        "catalog": entries,
        "fix": "import fwd9m\nfwd9m.enable_determinism(seed=0)  # before JAX starts: "
        "XLA_FLAGS=--xla_gpu_deterministic_ops=true",
    }


def _callback_culprit(
    first, callbacks: list[str], ha: dict, hashseed: str | None, entries: list[dict], note: str = ""
) -> dict[str, Any]:
    """A JAX culprit that runs a host callback: a jit holding one, or the callback
    primitive itself run eagerly (``callbacks == [first.op]``)."""
    cbs = ", ".join(callbacks)
    eager = callbacks == [first.op]
    where = "it is a host callback" if eager else f"it calls back into Python ({cbs})"
    note = f" {note}" if note else ""
    return {
        "headline": f"{first.op} gave different outputs from identical inputs: {where}, and that "
        f"Python code can return different values in each run{note}",
        "causes": [
            f"a host callback ({cbs}) returns values computed in Python: an unseeded NumPy "
            f"or Python RNG, the clock or a file makes them differ, and JAX does not see "
            f"inside it"
        ]
        + ([] if eager else _JIT_CAUSES),
        "catalog": _entries_by_id(["python.numpy-unseeded"]) + entries,
        "fix": _JAX_CALLBACK_FIX,
        "lint": _lint(ha, "python", hashseed),
    }


_JIT_CAUSES = [
    "an XLA kernel that accumulates in a run-dependent order (scatter-add, "
    "atomics-based reductions on GPU, autotuning)",
    "to name the op: call the function's body without jax.jit while debugging "
    "(a different program, so the op may behave differently)",
]


def _catalog():
    try:
        from .. import catalog
    except ImportError:  # the catalog is optional for debug
        return None
    return catalog


def _entry_dict(e) -> dict[str, Any]:
    return {
        "id": e.id,
        "title": e.title,
        "kind": e.kind,
        "fix": getattr(e, "fix", ""),
        "summary": e.summary.strip(),
        "references": list(e.references),
        "behaviour": getattr(e, "behaviour", None),
    }


def _device_kind(device: str) -> str:
    """The catalog's device name (cpu, gpu, tpu) of a recorded op's device."""
    up = device.upper()
    return "gpu" if device.startswith("cuda") or "GPU" in up else "tpu" if "TPU" in up else "cpu"


def _on_device(lint: list[dict], device: str) -> list[dict]:
    """The lint findings that can explain an op on ``device``: a finding for a catalog
    entry of other devices only (``[catalog ID]`` in its message: "crop_and_resize
    backprop on GPU") is left out for an op that ran on the CPU, as its entry is."""
    cat = _catalog()
    if cat is None or not device:
        return lint
    dev = _device_kind(device)
    out = []
    for x in lint:
        m = re.search(r"\[catalog ([\w.-]+)\]", x.get("message", ""))
        try:
            devices = tuple(getattr(cat.get(m.group(1)), "devices", ()) or ()) if m else ()
        except Exception:  # noqa: BLE001 - not an entry of this catalog: kept
            devices = ()
        if not devices or dev in devices:
            out.append(x)
    return out


def _entries_for_op(framework: str, op: str, version: str | None, device: str) -> list[dict]:
    cat = _catalog()
    if cat is None:
        return []
    fw = "tensorflow" if framework == "keras" else framework
    dev = _device_kind(device)
    try:
        found = cat.for_op(fw, op, version=version, device=None)
    except Exception as exc:  # noqa: BLE001 - a catalog problem must not hide the finding
        logger.debug("catalog.for_op(%s, %s) failed: %s", fw, op, exc)
        return []
    # an entry for other devices only (a cuBLAS entry for a CPU op) does not explain this run
    return [_entry_dict(e) for e in found if not getattr(e, "devices", ()) or dev in e.devices]


def _frameworks(ha: dict) -> set[str]:
    """Catalog frameworks that fit a trace: those it recorded (Keras with TensorFlow)
    and Python."""
    names = {"tensorflow" if n == "keras" else n for n in ha.get("frameworks") or ()}
    return names | ({"keras"} if "tensorflow" in names else set()) | {"python"}


def _entries_by_id(ids: list[str], frameworks: set[str] | None = None) -> list[dict]:
    """Catalog entries by id, those of other frameworks than ``frameworks`` left out."""
    cat = _catalog()
    out = []
    if cat is None:
        return out
    for i in ids:
        if frameworks is not None and i.split(".", 1)[0] not in frameworks:
            continue
        try:
            out.append(_entry_dict(cat.get(i)))
        except Exception:  # noqa: BLE001 - entry not (yet) in the catalog
            continue
    return out


def _script(ha: dict) -> str | None:
    """The script a trace recorded (None for ``-m module`` or a foreign trace)."""
    program = ha.get("program") or {}
    script = program.get("script")
    return None if program.get("module") or not isinstance(script, str) else script


def _lint_catalog(lint: list[dict]) -> list[str]:
    """Catalog entries the script's lint findings point at: a NumPy generator without a
    seed (FWD103, FWD109), a seed from the clock (FWD104)."""
    out = []
    for x in lint:
        msg = x.get("message", "")
        if x["code"] in ("FWD103", "FWD109") and "numpy" in msg.lower():
            out.append("python.numpy-unseeded")
        elif x["code"] == "FWD104":
            out.append("python.time-seed")
    return list(dict.fromkeys(out))


def _situated_fix(fix: str, lint: list[dict], script: str | None) -> str:
    """``fix`` (a general fix such as ``keras.utils.set_random_seed(0)``) fitted to the
    script: when the script already calls what the fix calls, pasting it again changes
    nothing, so the fix is the lint findings' fixes for their lines ("move line 45 above
    line 44"), or a note that the call is there but does not take effect. Only seeding
    calls count (fwd9m lint's table of them): a fix that also names ``DataLoader`` is
    not "already done" because the script makes a DataLoader."""
    import re

    from ..check._hints import _used_names
    from ..lint._helpers import SEED_CALLS

    calls = {
        c
        for c in re.findall(r"\b([A-Za-z_][\w.]*\.[A-Za-z_]\w*)\(", fix)
        if c in SEED_CALLS or c.replace("tf.", "tensorflow.", 1) in SEED_CALLS
    }
    if not calls or not script:
        return fix
    qualified, _ = _used_names(script)
    done = sorted(
        c
        for c in calls
        if c in qualified
        or c.replace("tensorflow.", "tf.", 1) in qualified
        or c.replace("tf.", "tensorflow.", 1) in qualified
    )
    if not done:
        return fix
    own = [f"{x['fix']}  # {x['path']}:{x['line']} ({x['code']})" for x in lint if x.get("fix")]
    head = (
        f"# the script already calls {', '.join(done)}, but it does not take effect where the "
        f"values are drawn (too late, or on another path)"
    )
    return "\n".join([head, *own] if own else [head, fix])


def _argv(ha: dict) -> list[str] | None:
    """The recorded run's ``sys.argv`` (script first), None when the trace does not say."""
    program = ha.get("program") or {}
    script, args = _script(ha), program.get("argv")
    ok = script is not None and isinstance(args, list) and all(isinstance(a, str) for a in args)
    return [script, *args] if ok else None


def _lint(ha: dict, cause: str, hashseed: str | None) -> list[dict]:
    from .. import _lint_hints

    exclude = _lint_hints.HASH_CODES if hashseed in _NOT_HASH else ()
    # the environment of the recorded run is not in the trace (only determinism variables):
    # conditions on os.environ stay undecided
    return _lint_hints.findings(_script(ha), cause, exclude=exclude, argv=_argv(ha))


def explain(
    first,
    report,
    ha: dict,
    hb: dict,
    hashseed: str | None = None,
    hashseed_note: str | None = None,
    pipeline: list[dict] | None = None,
) -> dict[str, Any]:
    """What to tell the user about ``first`` (a Divergence): headline, causes, catalog
    entries (id, title, fix, references), the fix to paste, and ``lint``: the findings
    of fwd9m's lint rules on the recorded script that fit the cause (path, line, code,
    message, fix; see :mod:`fwd9m._lint_hints`).

    ``hashseed`` is the verdict of the controlled hash-seed experiment
    (:mod:`fwd9m._hashseed`): None (not tested), ``"ruled-out"``, ``"not-confirmed"``,
    ``"intermittent"``, ``"incomplete"``, ``"likely"`` or ``"confirmed"``, and
    ``hashseed_note`` its message (shown among the causes of a ``hashseed`` source);
    once tested, the advice to test it goes, and when ruled out, not confirmed or
    intermittent so do the hash-order causes and catalog entries. ``report``: the
    framework recorded (a name, or the Report that names it). ``pipeline``: the random
    draws of a data pipeline's parallel stage that the recorder saw but could not record
    op by op (the trace end's ``pipeline``; by default the Report's)."""
    framework = report if isinstance(report, str) else report.framework
    if pipeline is None:
        pipeline = list(getattr(report, "pipeline", None) or [])
    env = ha.get("environment") or {}
    version = ((env.get("frameworks") or {}).get(framework) or {}).get("version") or (env.get("packages") or {}).get(
        framework
    )
    if first.kind == "culprit":
        return _explain_culprit(first, framework, version, env, ha, hashseed)
    if first.kind == "external":
        told = _explain_external(first, framework, env, ha, hashseed, hashseed_note)
        if first.source == "data":
            told = _parallel_draw(first, told, pipeline) if pipeline else _pydataset_draw(told, ha)
        if first.source in ("data", "python") and _keras_seed_state(first, ha):
            from ..keras._debug import seed_state_explanation

            told = seed_state_explanation(told, first.op, first.location, first.detail)
            told["catalog"] = _entries_by_id(["keras.seed-generator"]) + [
                e for e in told.get("catalog", []) if e["id"] != "keras.seed-generator"
            ]
        elif first.source in ("data", "python") and not told.get("unconfirmed"):
            told = _made_by(first, told, ha)
        return told
    if first.kind == "structural":
        return _explain_structural()
    return {}


def _explain_structural() -> dict[str, Any]:
    """The runs execute different ops."""
    return {
        "headline": "the two runs execute different ops (control flow or shapes differ)",
        "causes": [
            "a branch depends on a value that differs (data, RNG, time)",
            "the runs are different programs or got different arguments",
            "a run stopped early (crash, kill, different number of steps)",
        ],
        "catalog": [],
        "fix": "# make the inputs of the branch reproducible first; see the ops shown for both runs",
    }


def _explain_module_pass(first) -> dict[str, Any]:
    """A culprit of the module-level pass (``--fast``): a module, layer, gradient or update."""
    coarse = first.op.split(":", 1)[0]
    what = {
        "module": f"module {first.module} (forward)",
        "layer": f"layer {first.module} (forward)",
        "grad": f"the gradient of {first.module} (backward)",
        "grads": f"the gradients of {first.module} (backward)",
        "param": f"the update of {first.module} (optimizer)",
        "params": f"the update of {first.module}'s parameters (optimizer)",
    }
    return {
        "headline": f"module-level pass: {what[coarse]} is the first "
        f"to differ from identical inputs in step {first.step}",
        "causes": ["a nondeterministic op inside it; record that step op by op to name it"],
        "catalog": [],
        "fix": f"fwd9m debug --steps {first.step}:{first.step} SCRIPT  # op-level recording of step {first.step} only",
    }


def _explain_culprit(
    first, framework: str, version: str | None, env: dict, ha: dict, hashseed: str | None
) -> dict[str, Any]:
    """An op whose inputs agree and outputs differ: the catalog's entry for it, or the
    advice to switch on deterministic kernels."""
    if first.op.split(":", 1)[0] in ("module", "layer", "grad", "grads", "param", "params"):
        return _explain_module_pass(first)
    if framework == "jax" and first.node.partition(":")[0] == "jit":
        return _jit_culprit(first, version, ha, hashseed)
    if first.node.startswith(COMPILED_NODE):  # a compiled graph recorded as one op (torch.compile)
        return dict(compiled_culprit(first), lint=_lint(ha, "op", hashseed))
    if framework == "tensorflow" and first.node == XLA_NODE:  # tf.function(jit_compile=True)
        return dict(xla_culprit(first), lint=_lint(ha, "op", hashseed))
    if framework == "jax":
        from ..jax._recorder import CALLBACK_PRIMITIVES

        if first.op in CALLBACK_PRIMITIVES:  # run eagerly, outside any jit
            return _callback_culprit(first, [first.op], ha, hashseed, [])
    entries = _entries_for_op(framework, first.op, version, first.device)
    if entries:
        fix = entries[0]["fix"]
        headline = f"{first.op} is nondeterministic here: {entries[0]['title']}"
    else:
        headline = (
            f"{first.op} gave different outputs from identical inputs; it is not in fwd9m's catalog (please report it)"
        )
        fix = (
            "import fwd9m\nfwd9m.enable_determinism(seed=0)  # switch on the framework's "
            "deterministic kernels,\n# then run `fwd9m debug` again to see if it persists"
        )
    causes = ["the kernel accumulates in a run-dependent order (atomics or threads)"]
    if framework == "torch":
        threads = ((env.get("frameworks") or {}).get("torch") or {}).get("intra_op_threads")
        if threads and threads > 1 and not first.device.startswith("cuda"):
            causes.append(
                f"torch runs {threads} intra-op threads; torch.set_num_threads(1) is a (slow) workaround on CPU"
            )
    lint = _on_device(_lint(ha, "op", hashseed), first.device)
    return {"headline": headline, "causes": causes, "catalog": entries, "fix": fix, "lint": lint}


def _explain_external(
    first, framework: str, env: dict, ha: dict, hashseed: str | None, hashseed_note: str | None
) -> dict[str, Any]:
    """A value that entered from outside the recorded ops: its kind's causes and fix,
    adjusted to the framework, the hash-seed experiment and the script's lint lines."""
    source = first.source or "python"
    headline, causes, ids, fixes = _EXTERNAL[source]
    causes = list(causes)
    hs = (env.get("env") or {}).get("PYTHONHASHSEED")
    if source in ("python", "data") and hs in (None, "random") and hashseed is None:
        causes.append(
            "PYTHONHASHSEED is not set in the recorded runs, so set/dict order "
            "could differ: rerun with PYTHONHASHSEED=0 to test"
        )
    fix = fixes.get(framework, fixes.get("torch", ""))
    if framework == "torch" and source == "data":
        from .._lint_hints import uses_loader_workers

        if uses_loader_workers(_script(ha)):
            fix = _TORCH_WORKERS_FIX
    if framework == "jax":
        ids = _JAX_IDS.get(source, []) + [i for i in ids if i.startswith("python.")]
        if "keras" not in (ha.get("frameworks") or ()):  # plain JAX: no Keras or TF words
            headline, causes = _JAX_TEXT.get(source, (headline, causes))
        from ..jax._recorder import PROGRAM_META

        # _compare names the first differing input's meta in the detail
        if source == "python" and f"({PROGRAM_META})" in first.detail:
            headline = (
                f"the compiled program of {first.op} differs between the runs (static "
                f"argument or captured value): a Python value baked into it changed"
            )
            causes = _JAX_PROGRAM_CAUSES + causes
            fix = _JAX_PROGRAM_FIX + "\n" + fix
    headline, causes, fix = _python_made(first, framework, source, (headline, causes, fix))
    if source == "hashseed" and hashseed_note:
        causes.append(hashseed_note)
    if hashseed in _NOT_HASH and source != "hashseed":
        causes = [c for c in causes if "PYTHONHASHSEED" not in c]
        ids = [i for i in ids if i not in _HASH_IDS]
        fix = "\n".join(line for line in fix.splitlines() if "PYTHONHASHSEED" not in line)
    if hashseed in ("intermittent", "not-confirmed"):
        causes.append(
            "the divergence did not recur in reruns with a fixed hash seed, or came and went "
            "under one (intermittent): something that varies only now and then, such as a race "
            "between threads or processes"
        )
    if source == "data":
        batch = "the first batch" if first.step == 0 else f"batch {first.step}"
        headline += f" at {batch} (step {first.step})" + _worker_draw(framework, ha)
    lint = _lint(ha, source, hashseed)
    ids = [*(i for i in _lint_catalog(lint) if i not in ids), *ids]  # what the script's lines point at, first
    return {
        "headline": headline,
        "causes": causes,
        "catalog": _entries_by_id(ids, _frameworks(ha)),
        "fix": _situated_fix(fix, lint, _script(ha)),
        "lint": lint,
    }


def _worker_draw(framework: str, ha: dict) -> str:
    """Where a PyTorch batch that differs was drawn: the random draws of the dataset's
    methods that the DataLoader's worker processes run (``Dataset.__getitem__``), when the
    script starts workers; "" otherwise. The workers are not recorded: their values reach
    the recorded ops as the batch."""
    from .._lint_hints import uses_loader_workers, worker_draws

    script = _script(ha)
    if framework != "torch" or not uses_loader_workers(script):
        return ""
    draws = worker_draws(script)
    if not draws:
        return ""
    name = os.path.basename(str(script))
    where = "; ".join(f"{name}:{line} in {method} ({call})" for line, method, call in draws[:3])
    return f"; source: the random draw in the DataLoader's worker processes (data phase, worker process): {where}"


def _parallel_draw(first, told: dict[str, Any], pipeline: list[dict]) -> dict[str, Any]:
    """A batch that differs, from a data pipeline whose parallel stage draws random
    numbers on several threads (the recorder names the draw: ``pipeline``): that draw is
    the likely source, named at its line with its catalog entry, but *unconfirmed*: the
    stage's ops were not recorded one by one, so no replay shows it."""
    p = pipeline[0]
    where = f"{p['op']} at {p.get('location') or '?'} in {p.get('where') or 'a parallel stage'}"
    entries = _entries_by_id([p["catalog"]]) if p.get("catalog") else []
    shown = {e["id"] for e in entries}
    entries += [e for e in told.get("catalog", []) if e["id"] not in shown]
    fixes = [s for e in entries[:1] for s in _solutions(e["id"])]
    fix = "\n".join(
        [f"# the random draw {p['op']} at {p.get('location') or '?'} runs on several threads of the pipeline:"]
        + [f"{code}   # {text}" if "\n" not in code else f"# {text}\n{code}" for text, code in fixes]
    )
    return dict(
        told,
        unconfirmed=True,
        headline=(
            f"unconfirmed: the input batch differs between the runs (data pipeline); the likely source is "
            f"the random draw {where}: "
            f"the stage runs its function on several threads, which draw from one generator in an order that "
            f"varies from run to run (not replayed: the stage's ops are not recorded one by one)"
        ),
        causes=[
            f"{p['op']} at {p.get('location') or '?'} draws in a parallel stage of the data pipeline: each "
            f"element gets the numbers of whichever thread reaches the generator first",
            *told.get("causes", []),
        ],
        catalog=entries,
        fix=fix if fixes else told.get("fix", ""),
    )


def _pydataset_draw(told: dict[str, Any], ha: dict) -> dict[str, Any]:
    """A batch that differs, in a script whose Keras ``PyDataset`` runs ``__getitem__`` on
    several workers: the draws there are the source, with the catalog's entry for it and
    its fix, not the advice for data pipelines the script does not have; ``told``
    unchanged otherwise."""
    from .._lint_hints import pydataset_workers, worker_draws

    script = _script(ha)
    made = pydataset_workers(script)
    if made is None:
        return told
    name = os.path.basename(str(script))
    draws = [d for d in worker_draws(script) if d[1].startswith(f"{made[1]}.")] or worker_draws(script)
    where = "; ".join(f"{name}:{line} in {method} ({call})" for line, method, call in draws[:3])
    entries = _entries_by_id(["keras.pydataset-workers"])
    entries += [
        e
        for e in told.get("catalog", [])
        if not e["id"].endswith("shuffle-seed")
        and not e["id"].startswith("torch.")
        and e["id"] not in {"keras.pydataset-workers"}
    ]
    fix = "\n".join(
        [f"# {name}:{made[0]}: {made[1]} runs __getitem__ on several workers; its draws must not depend on their order"]
        + [f"{code}   # {text}" for text, code in _solutions("keras.pydataset-workers")]
    )
    headline = told.get("headline", "") + (
        f"; source: the random draw in the PyDataset's workers (data phase, worker threads or processes): {where}"
        if where
        else f"; source: {made[1]} made at {name}:{made[0]} runs __getitem__ on several workers"
    )
    causes = [
        f"{made[1]}.__getitem__ runs on several workers (threads or processes): draws from a shared "
        f"or unseeded generator come in another order, or with other values, in each run",
        *(c for c in told.get("causes", []) if "shuffle" not in c),
    ]
    return dict(told, headline=headline, causes=causes, catalog=entries, fix=fix)


def _keras_seed_state(first, ha: dict) -> bool:
    """Whether the first differing value is a Keras SeedGenerator's state: a script that
    trains through Keras, and a differing input of that state's dtype and shape."""
    from ..keras._debug import SEED_STATE_METAS
    from ._child import detect_frameworks

    script = _script(ha)
    if not any(f"({m})" in first.detail for m in SEED_STATE_METAS):  # _compare names the input's meta
        return False
    return bool(script) and "keras" in (ha.get("frameworks") or []) + detect_frameworks(script, False)


def _made_by(first, told: dict[str, Any], ha: dict) -> dict[str, Any]:
    """A value made outside every recorded framework, named at the line that made it: the
    names the first recorded op reads at its line, followed back through the script's
    assignments to a library call that takes a seed and was not given one (scikit-learn's
    ``KMeans(...)`` without ``random_state``), with that call seeded as the fix; ``told``
    unchanged when none is found."""
    from .._lint_hints import unseeded_origin

    script = _script(ha)
    name = os.path.basename(str(script))
    file, _, line = (first.location or "").rpartition(":")
    if not script or os.path.basename(file) != name or not line.isdigit():
        return told
    got = unseeded_origin(script, int(line))
    if got is None:
        return told
    at, call, param, fixed = got
    headline = (
        f"{told.get('headline', '')}; the value was made at {name}:{at} by {call} without {param} "
        f"(outside the recorded framework ops), and read by them at {first.location}"
    )
    fix = f"# {name}:{at}: seed the call that made the value\n{fixed}"
    causes = [f"{call} at {name}:{at} draws from an unseeded generator: pass {param}=S", *told.get("causes", [])]
    catalog = [e for e in told.get("catalog", []) if not e["id"].startswith("torch.dataloader")]
    return dict(told, headline=headline, causes=causes, catalog=catalog, fix=fix)


def _solutions(entry_id: str) -> list[tuple[str, str]]:
    """(text, code) of each solution of catalog entry ``entry_id`` that has code."""
    cat = _catalog()
    try:
        return [(s.text, s.code) for s in cat.get(entry_id).solutions if s.code] if cat else []
    except Exception:  # noqa: BLE001 - not an entry of this catalog
        return []


_PYTHON_OP_CAUSE = (
    "the function draws from Python's random or NumPy's global RNG (unseeded), or reads the clock or a file"
)
_PYTHON_OP_FIX = (
    "import fwd9m, numpy as np\n"
    "# inside the function: a generator with a fixed seed, made once outside it\n"
    'rng = np.random.default_rng(fwd9m.derive_seed(0, "py_function"))\n'
    "# or seed Python's random and NumPy's global RNG before the first call:"
)
_JAX_PYTHON_OP_FIX = "# in the callback: no unseeded draw; a generator with a fixed seed, made once outside it:"


_BAKED_CAUSE = (
    "the compiled function reads a Python number made outside it (drawn from random or "
    "NumPy, read from the clock) and compilation turned it into a constant of the code"
)


def _baked_constant(first) -> bool:
    """Whether the first differing input of a compiled call (torch.compile, XLA) is a
    constant of its code (the ``constants`` / ``constant NODE`` arguments the recorders add)."""
    compiled = first.node.startswith(COMPILED_NODE) or first.node == XLA_NODE
    return compiled and ("argument 'constants' of" in first.detail or "argument 'constant " in first.detail)


def _python_made(first, framework: str, source: str, told: tuple) -> tuple[str, list[str], str]:
    """(headline, causes, fix) of an external value the program's Python made where a
    recorder sees it only as a whole: an op running a Python function, or a constant baked
    into compiled code; else ``told`` unchanged."""
    headline, causes, fix = told
    if first.op in PYTHON_OPS:  # tf.py_function / numpy_function, an eager jax.pure_callback
        return _python_op(first.op, framework, causes, fix)
    if source == "python" and _baked_constant(first):
        headline = (
            f"a Python value baked into the compiled code of {first.op} (a constant it closes "
            f"over: a global or a closure variable) differs between the runs"
        )
        return headline, [_BAKED_CAUSE, *causes], fix
    return told


def _python_op(op: str, framework: str, causes: list[str], fix: str) -> tuple[str, list[str], str]:
    """(headline, causes, fix) of an op running the program's Python (PYTHON_OPS)."""
    headline = (
        f"the Python function run by {op} ({PYTHON_OPS[op]}) returns different "
        f"values from identical inputs: Python code, not a kernel"
    )
    causes = [_PYTHON_OP_CAUSE, *(c for c in causes if "Python's random" not in c)]
    return headline, causes, (_JAX_PYTHON_OP_FIX if framework == "jax" else _PYTHON_OP_FIX) + "\n" + fix


#: the likely causes of a culprit whose replay alone did not vary
_UNCONFIRMED_CAUSES = [
    "an input was changed outside the recorded ops, in memory shared with NumPy or another "
    "library (a `.numpy()` view written, a `torch.from_numpy` buffer refilled in place): the "
    "inputs were recorded as identical but were not",
    "concurrency with other work at the time (other threads, streams or processes)",
    "state the op reads that is not an input (a cache, a global setting, the memory layout)",
]


def unconfirmed(first, framework: str) -> dict[str, Any]:
    """The explanation of a culprit whose replay says "not reproduced in isolation": the
    op is not known to be nondeterministic, so it is not blamed (no "please report it"),
    and the catalog's fix is kept only for an op the catalog lists."""
    ex = dict(first.explanation or {})
    ex["unconfirmed"] = True
    ex["headline"] = (
        f"unconfirmed: {first.op} gave different outputs from inputs recorded as identical, "
        f"but replayed alone on those inputs it is deterministic; what changed is likely "
        f"outside the op"
    )
    causes = _UNCONFIRMED_CAUSES if framework == "torch" else _UNCONFIRMED_CAUSES[1:]
    ex["causes"] = [*causes, *(c for c in ex.get("causes", []) if "intra-op threads" in c)]
    if not ex.get("catalog"):
        ex["fix"] = (
            "# the op is not shown to be at fault: rerun fwd9m debug to see whether the divergence\n"
            "# recurs at the same op, and seed the NumPy/Python randomness that fills its inputs"
            + (
                ";\n# a tensor written through NumPy (t.numpy()[:] = ..., a torch.from_numpy buffer\n"
                "# refilled in place) changes outside torch's ops"
                if framework == "torch"
                else ""
            )
        )
    return ex


def not_replayed(first, framework: str, why: str) -> dict[str, Any]:
    """The explanation of a culprit the catalog does not list and no replay confirmed
    (the replay could not run, or was not asked for): inputs recorded as identical and
    outputs that differ do not show the op to be at fault, so it is "unconfirmed", with
    no "please report it"; ``first``'s explanation unchanged for a listed op."""
    ex = dict(first.explanation or {})
    if ex.get("catalog") or ex.get("unconfirmed") or first.kind != "culprit":
        return ex
    ex = unconfirmed(first, framework)
    ex["headline"] = (
        f"unconfirmed: {first.op} gave different outputs from inputs recorded as identical, but it "
        f"was not replayed ({why}), and fwd9m's catalog does not list it: it is not shown to be at fault"
    )
    ex["causes"] = [
        *ex["causes"],
        "a nondeterministic kernel (atomics or threads): replay it with fwd9m debug (without --no-replay) to tell",
    ]
    return ex
