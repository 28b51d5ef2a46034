"""Child side of ``fwd9m check --resume``: step boundaries, the interruption, and the
state at the start of each step, with no change to the user's script.

``python -m fwd9m.check._resume_child [-m] TARGET [ARGS...]`` installs the hooks below,
then runs TARGET as :mod:`fwd9m._runtime.capture` does (final state saved at exit). With
:data:`ENV_DIR` unset it only runs the target.

Step boundaries come from two places:

- PyTorch (plain loops, Lightning, HF ``Trainer``: they all step a ``torch.optim``
  optimizer): the global optimizer step hooks
  ``torch.optim.optimizer.register_optimizer_step_pre_hook`` / ``..._post_hook``
  (torch/optim/optimizer.py, https://github.com/pytorch/pytorch; ``Optimizer.step``
  runs the pre hooks, the step, then the post hooks), subscribed through
  :mod:`fwd9m.torch._steps`, which runs them eagerly also when the step is compiled.
  Steps of the first optimizer that steps are counted.
- JAX (:mod:`fwd9m.jax._steps`, shared with ``fwd9m check``'s early stop): a jitted
  function is a training step when its trace calls ``optax.apply_updates``
  (a jitted step calls it only while tracing, so it is seen once, at the first call):
  ``jax.jit`` is wrapped so that each host call of that function is a step, and the
  argument holding the leaves ``apply_updates`` received as ``params`` is the model's
  weights (with what it holds besides: flax's ``TrainState``);
  every other argument (optimizer state, PRNG key, batch) is a state component named by
  its parameter name. Not seen: a step that is not jitted (eager), one jitted by another
  wrapper (``flax.nnx.jit``, ``pmap``), or one that applies updates without
  ``optax.apply_updates``.
- Keras ``fit``: a callback added to every ``keras.callbacks.CallbackList`` (built by
  ``fit`` from the user's callbacks, keras/src/callbacks/callback_list.py,
  https://github.com/keras-team/keras); it comes after the user's callbacks, so a
  ``BackupAndRestore`` save at the same batch or epoch end has happened when it runs.
- Epoch ends of Lightning's ``Trainer.fit`` and HF's ``Trainer.train`` (for
  ``--interrupt-after epoch:N``): a callback each, taken after the epoch's checkpoint
  is written (:func:`_install_lightning`, :func:`_install_transformers`).

Each hook is installed when its framework finishes importing (a ``sys.meta_path``
finder, as ``fwd9m run``'s import hook does).

What the child writes into :data:`ENV_DIR`:

- ``events.jsonl``: one JSON object a line: ``{"e": "pre", "step": j, "state": {...}}``
  (the digest of each state component before step ``j``, 1-based: weights, optimizer,
  RNG streams, sampler position, ...; only for the first :data:`ENV_RECORD` steps),
  ``{"e": "post", "step": j, "stdout": offset}`` (bytes written to standard output when
  step ``j`` ended), ``{"e": "epoch", "epoch": n}``.
- ``interrupt.json`` (run B, :data:`ENV_AT`): written at the boundary where the run is to
  be interrupted (``{"pid", "step", "epoch", "at"}``); the child then waits until the
  parent has sent its signal (it writes ``signalled``), so where the run stops does not
  depend on timing. A handler the script installed for the signal runs then, as it
  would under a scheduler.

A failing hook writes ``{"e": "error", ...}`` and lets the program go on.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any

ENV_DIR = "FWD9M_RESUME_DIR"
#: run B: what a checkpoint is called (a glob, ``--checkpoint``); without it, a file in a
#: framework's save format or in a folder named as checkpoints are (:func:`_is_checkpoint`)
ENV_CHECKPOINT = "FWD9M_RESUME_CHECKPOINT"
#: set by fwd9m's isolation in the run: the folder that holds exactly what the run wrote
#: in its working directory (walked instead of the whole project)
ENV_WRITES = "FWD9M_RUN_WRITES"
#: run B: where to interrupt: ``step:N``, ``epoch:N`` or ``checkpoint:N``
ENV_AT = "FWD9M_RESUME_AT"
#: how many steps' state to record (the first K steps' "pre" events)
ENV_RECORD = "FWD9M_RESUME_RECORD"
#: seconds the child waits for the parent's signal before it goes on (the parent died)
WAIT_S = 120.0

_state: dict[str, Any] = {
    "step": 0,
    "epoch": 0,
    "checkpoints": 0,
    "optimizer": None,
    "done": False,
    "objects": None,
    "files": None,
}


# --------------------------------------------------------------------------- events


def _emit(event: dict[str, Any]) -> None:
    try:
        with open(os.path.join(os.environ[ENV_DIR], "events.jsonl"), "a", encoding="utf-8") as f:
            f.write(json.dumps(event) + "\n")
    except Exception:  # never break the user's program
        pass


def _stdout_offset() -> int | None:
    """Bytes written to standard output so far (it is a file the parent opened)."""
    try:
        sys.stdout.flush()
        return os.lseek(1, 0, os.SEEK_CUR)
    except Exception:
        return None


# --------------------------------------------------------------------------- digests


def digest(tree: Any) -> str:
    """An exact digest of a tree of dicts, lists, scalars and arrays (NumPy, torch, TF,
    Keras variables): equal trees, equal digests; any changed bit, another digest."""
    h = hashlib.blake2b(digest_size=12)
    _feed(h, tree, 0)
    return h.hexdigest()


def _feed(h: Any, x: Any, depth: int) -> None:
    if depth > 50:
        h.update(b"<deep>")
        return
    if isinstance(x, dict):
        h.update(b"{")
        for k in sorted(x, key=str):
            h.update(repr(str(k)).encode() + b":")
            _feed(h, x[k], depth + 1)
        h.update(b"}")
        return
    if isinstance(x, (list, tuple)):
        h.update(b"[")
        for v in x:
            _feed(h, v, depth + 1)
        h.update(b"]")
        return
    if x is None or isinstance(x, (bool, int, float, str, bytes)):
        h.update(repr(x).encode())
        return
    arr = _as_array(x)
    if arr is None:
        h.update(f"<{type(x).__name__}>".encode())
        return
    h.update(f"nd:{arr.dtype.str}:{arr.shape}:".encode())
    h.update(arr.tobytes())


def _as_array(x: Any) -> Any:
    np = sys.modules.get("numpy")
    if np is None:
        return None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        t = x.detach().cpu().contiguous().reshape(-1)
        return t.view(torch.uint8).numpy()  # any dtype (bfloat16 too), by its bytes
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(x)
    if isinstance(x, np.generic):
        return np.asarray(x)
    jax = sys.modules.get("jax")
    if jax is not None and isinstance(x, jax.Array):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):  # a typed key: its bits
            x = jax.random.key_data(x)
        return np.ascontiguousarray(np.asarray(x))
    if hasattr(x, "numpy") and callable(x.numpy):  # TF tensors and variables, Keras variables
        try:
            return np.ascontiguousarray(np.asarray(x.numpy()))
        except Exception:
            return None
    return None


def _rng_components() -> dict[str, str]:
    """The digest of each RNG stream fwd9m.rng sees (globals of imported frameworks and
    registered generators), keyed ``rng:<source>``."""
    from ..rng import capture_rng_state

    return {f"rng:{name}": digest(value) for name, value in capture_rng_state().items()}


# --------------------------------------------------------------------------- torch


def _torch_objects() -> dict[str, list[Any]]:
    """LR schedulers, gradient scalers, fwd9m ResumableSamplers and DataLoaders with a
    generator, found once (they are made before the first step), held weakly."""
    import gc
    import weakref

    torch = sys.modules["torch"]
    kinds: list[tuple[str, Any]] = [
        ("lr scheduler", getattr(torch.optim.lr_scheduler, "LRScheduler", None)),
        ("grad scaler", getattr(getattr(torch, "amp", None), "GradScaler", None)),
        ("data loader generator", torch.utils.data.DataLoader),
    ]
    data = sys.modules.get("fwd9m.data")
    if data is not None:
        kinds.append(("sampler position", data.ResumableSampler))
    found: dict[str, list[Any]] = {}
    for o in gc.get_objects():
        for name, cls in kinds:
            # type(o), not isinstance: isinstance reads o.__class__, which raises
            # ReferenceError on a weakref.proxy whose object is gone (Dynamo leaves such
            # proxies behind when it compiles a function that calls optimizer.step())
            if cls is not None and issubclass(type(o), cls):
                try:
                    found.setdefault(name, []).append(weakref.ref(o))
                except TypeError:
                    pass
    return found


def _torch_state(optimizer: Any) -> dict[str, str]:
    params = [p for g in optimizer.param_groups for p in g["params"]]
    sd = optimizer.state_dict()
    groups = [{k: v for k, v in g.items() if k != "params"} for g in sd.get("param_groups", [])]
    out = {"model weights": digest(params), "optimizer": digest([sd.get("state", {}), groups])}
    if _state["objects"] is None:
        _state["objects"] = _torch_objects()
    for name, refs in _state["objects"].items():
        values = []
        for ref in refs:
            o = ref()
            if o is None:
                continue
            if name == "data loader generator":
                if o.generator is not None:
                    values.append(o.generator.get_state())
                out.update(_held_generators(o))
            else:
                values.append(o.state_dict())
        if values:
            out[name] = digest(values)
    out.update(_rng_components())
    return out


def _held_generators(loader: Any) -> dict[str, str]:
    """Generators (``random.Random``, NumPy, torch) held as attributes by a DataLoader's
    dataset (and its ``.dataset`` chain) and collate function, as
    ``fwd9m.data.reseed_dataset_generators`` finds them: ``generator:<where>.<attr>``.
    In the main process they are the ones used when ``num_workers=0``."""
    from ..data import _generator_attrs

    out = {}
    todo = [("dataset", loader.dataset), ("collate_fn", loader.collate_fn)]
    # a collator wrapped by the trainer (HF's RemoveColumnsCollator.data_collator): one level in
    todo += [
        (f"collate_fn.{k}", v)
        for k, v in sorted(getattr(loader.collate_fn, "__dict__", {}).items())
        if hasattr(v, "__dict__") and callable(v) and not isinstance(v, type)
    ]
    for where, obj in todo:
        for path, gen in _generator_attrs(obj):
            out[f"generator:{where}.{path}"] = digest(_generator_state(gen))
    return out


def _generator_state(gen: Any) -> Any:
    if hasattr(gen, "bit_generator"):  # numpy Generator
        return gen.bit_generator.state
    if hasattr(gen, "get_state"):  # numpy RandomState, torch.Generator
        return gen.get_state()
    return gen.getstate()  # random.Random


def _install_torch() -> None:
    from ..torch._steps import subscribe

    def pre(optimizer, args, kwargs):
        if _mine(optimizer):
            _before_step(lambda: _torch_state(optimizer), _torch_stack())

    def post(optimizer, args, kwargs):
        if _mine(optimizer):
            _after_step()

    subscribe(pre, post)


def _torch_stack() -> str:
    """Which trainer steps the optimizer (for the fixes the report gives)."""
    if "pytorch_lightning" in sys.modules or "lightning" in sys.modules:
        return "lightning"
    if "transformers.trainer" in sys.modules:
        return "transformers"
    return "torch"


def _mine(optimizer: Any) -> bool:
    """Whether ``optimizer`` is the one whose steps are counted (the first that steps)."""
    if _state["optimizer"] is None:
        import weakref

        _state["optimizer"] = weakref.ref(optimizer)
    return _state["optimizer"]() is optimizer


# --------------------------------------------------------------------------- keras


def _keras_state(model: Any) -> dict[str, str]:
    from ..keras._rng import layer_state

    out = {"model weights": digest(list(model.weights))}
    opt = getattr(model, "optimizer", None)
    if opt is not None and getattr(opt, "built", False):
        out["optimizer"] = digest(list(opt.variables))
    try:
        gens = layer_state(model)
    except Exception:
        gens = None
    if gens:
        out["keras seed generators"] = digest(gens)
    out.update(_rng_components())
    return out


def _install_keras() -> None:
    import keras

    from ..keras._hooks import add_to_every_fit

    class _StepHook(keras.callbacks.Callback):
        """fwd9m check --resume's step boundaries in fit (observes only)."""

        def on_train_batch_begin(self, batch, logs=None):
            _before_step(lambda: _keras_state(self.model), "keras")

        def on_train_batch_end(self, batch, logs=None):
            _after_step()

        def on_epoch_end(self, epoch, logs=None):
            _after_epoch()

    add_to_every_fit(
        _StepHook, lambda exc: _emit({"e": "error", "where": "keras callback", "error": f"{type(exc).__name__}: {exc}"})
    )


# --------------------------------------------------------------------------- epoch ends of trainers


def _install_lightning(package: str) -> Callable[[], None]:
    """The installer for Lightning (``package``: ``pytorch_lightning`` or
    ``lightning.pytorch``): each ``Trainer.fit`` gets a callback, appended to
    ``trainer.callbacks`` after the user's and after ``ModelCheckpoint`` (which the
    Trainer puts last: ``_reorder_callbacks`` in trainer/connectors/callback_connector.py),
    whose ``on_train_epoch_end`` is an epoch end: the epoch's checkpoint is written then."""

    def install() -> None:
        import functools
        import importlib

        trainer_cls = importlib.import_module(f"{package}.trainer.trainer").Trainer
        callback = importlib.import_module(f"{package}.callbacks").Callback

        class _EpochEnds(callback):  # type: ignore[misc, valid-type]
            """fwd9m check --resume's epoch ends in fit (observes only)."""

            def on_train_epoch_end(self, trainer, pl_module):
                _after_epoch()

        fit = trainer_cls.fit

        @functools.wraps(fit)
        def fit_observed(self, *args, **kwargs):
            if not any(isinstance(c, _EpochEnds) for c in self.callbacks):
                self.callbacks.append(_EpochEnds())
            return fit(self, *args, **kwargs)

        trainer_cls.fit = fit_observed

    return install


def _install_transformers() -> None:
    """HF ``Trainer.train`` gets a callback (``add_callback``) that takes an epoch's end
    once what follows ``on_epoch_end`` is done: the epoch's save (``on_save``, called
    after ``_save_checkpoint`` in ``_maybe_log_save_evaluate``, transformers/trainer.py),
    else the next epoch's or step's beginning, else the end of training."""
    import functools

    from transformers import trainer as hf_trainer
    from transformers.trainer_callback import TrainerCallback

    class _EpochEnds(TrainerCallback):
        """fwd9m check --resume's epoch ends in Trainer.train (observes only)."""

        pending = False

        def on_epoch_end(self, args, state, control, **kwargs):
            self.pending = True

        def _taken(self, *args, **kwargs):
            if self.pending:
                self.pending = False
                _after_epoch()

        on_save = on_epoch_begin = on_step_begin = on_train_end = _taken

    train = hf_trainer.Trainer.train

    @functools.wraps(train)
    def train_observed(self, *args, **kwargs):
        if not any(isinstance(c, _EpochEnds) for c in self.callback_handler.callbacks):
            self.add_callback(_EpochEnds())
        return train(self, *args, **kwargs)

    hf_trainer.Trainer.train = train_observed


# --------------------------------------------------------------------------- jax


def _jax_listener() -> Any:
    """The resume child's :class:`fwd9m.jax._steps.Listener`: the state before each step
    (the weights as ``model weights``, the other arguments as ``jax argument NAME``, by
    their parameter names, and the RNG streams), and each step's end."""
    from ..jax._steps import Listener

    class _Resume(Listener):
        def first(self, step: Any, args: tuple, kwargs: dict) -> Any:
            j = _state["step"] + 1  # the state before the trace, while the arguments are live
            return _safe(lambda: _jax_digests(args, kwargs), j) if j <= _record_limit() else None

        def before(self, step: Any, args: tuple, kwargs: dict) -> None:
            _before_step(lambda: _jax_state(step, _jax_digests(args, kwargs)), "jax")

        def after(self, step: Any, args: tuple, kwargs: dict, out: Any, token: Any) -> None:
            if token is not None:  # now that it is known which argument is the weights
                _emit({"e": "pre", "step": _state["step"] + 1, "hook": "jax", "state": _jax_state(step, token)})
            _after_step()

        def error(self, where: str, exc: BaseException) -> None:
            _emit({"e": "error", "where": where, "error": f"{type(exc).__name__}: {exc}"})

    return _Resume()


def _jax_state(step: Any, digests: tuple[list[str], dict[str, str], dict[str, str]]) -> dict[str, str]:
    """The state components of a call of ``step`` from its arguments' digests."""
    positional, keywords, rng = digests
    out = {}
    for i, d in enumerate(positional):
        name = step._fwd9m_names[i] if i < len(step._fwd9m_names) else f"#{i + 1}"
        out["model weights" if i == step._fwd9m_params else f"jax argument {name}"] = d
    out.update({f"jax argument {k}": d for k, d in sorted(keywords.items())})
    return {**out, **rng}


def _install_jax() -> None:
    from ..jax import _steps

    _steps.listen(_jax_listener())
    _steps.install_jit()


def _install_optax() -> None:
    from ..jax import _steps

    _steps.install_optax()


def _jax_digests(args: tuple, kwargs: dict) -> tuple[list[str], dict[str, str], dict[str, str]]:
    """The digest of each positional and keyword argument, and of the RNG streams."""
    jax = sys.modules["jax"]
    leaves = jax.tree_util.tree_leaves
    return (
        [digest(leaves(v)) for v in args],
        {k: digest(leaves(v)) for k, v in kwargs.items()},
        _rng_components(),
    )


def _record_limit() -> int:
    try:
        return int(os.environ.get(ENV_RECORD) or 0)
    except ValueError:
        return 0


def _safe(state, j: int) -> dict[str, str] | None:
    try:
        return state()
    except Exception as exc:  # a component fwd9m cannot read: say so, go on
        _emit({"e": "error", "where": f"state before step {j}", "error": f"{type(exc).__name__}: {exc}"})
        return None


# --------------------------------------------------------------------------- boundaries


def _before_step(state, hook: str) -> None:
    j = _state["step"] + 1
    if j > _record_limit():
        return
    values = _safe(state, j)
    if values is not None:
        _emit({"e": "pre", "step": j, "hook": hook, "state": values})


def _after_step() -> None:
    _state["step"] += 1
    _emit({"e": "post", "step": _state["step"], "stdout": _stdout_offset()})
    kind, n = _target()
    if kind == "step" and _state["step"] == n:
        _interrupt("step")
    elif kind == "checkpoint" and _new_files():
        _state["checkpoints"] += 1
        if _state["checkpoints"] == n:
            _interrupt("checkpoint")


def _after_epoch() -> None:
    _state["epoch"] += 1
    _emit({"e": "epoch", "epoch": _state["epoch"], "step": _state["step"]})
    kind, n = _target()
    if kind == "epoch" and _state["epoch"] == n:
        _interrupt("epoch")
    elif kind == "checkpoint" and _new_files():
        _state["checkpoints"] += 1
        if _state["checkpoints"] == n:
            _interrupt("checkpoint")


def _target() -> tuple[str | None, int]:
    kind, _, n = os.environ.get(ENV_AT, "").partition(":")
    try:
        return (kind or None), int(n)
    except ValueError:
        return None, 0


#: a folder being written: orbax-checkpoint writes a step into ``<step>.orbax-checkpoint-tmp-<time>``
#: and renames it to ``<step>`` when it is complete (orbax/checkpoint/_src/path/atomicity.py,
#: AtomicRenameTemporaryPath.finalize; atomicity_types.TMP_DIR_SUFFIX), asynchronously with
#: CheckpointManager's default async save
_UNFINISHED = (".orbax-checkpoint-tmp",)


#: what a checkpoint looks like without --checkpoint: the save formats of torch, Keras,
#: TF, safetensors, NumPy, Flax (msgpack), and any file in a folder or with a name that
#: says so (HF's checkpoint-500/, Lightning's checkpoints/, orbax step folders); never a
#: log, a config or a metrics file written at start
_CKPT_SUFFIXES = (".pt", ".pth", ".ckpt", ".safetensors", ".keras", ".h5", ".hdf5", ".npz", ".msgpack", ".index")
_CKPT_WORDS = re.compile(r"(?i)ckpt|checkpoint|orbax|saved_model|\.data-\d")
_NOT_CKPT = (".json", ".log", ".txt", ".csv", ".yaml", ".yml", ".out", ".err", ".md", ".tfevents")


def _is_checkpoint(path: str) -> bool:
    """Whether the file ``path`` (relative) is a checkpoint (:data:`ENV_CHECKPOINT`, else
    :data:`_CKPT_SUFFIXES` / :data:`_CKPT_WORDS`)."""
    pattern = os.environ.get(ENV_CHECKPOINT)
    rel = os.path.normpath(path)
    if pattern:
        return fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(os.path.basename(rel), pattern)
    name = os.path.basename(rel).lower()
    if ".tfevents" in name or name.endswith(_NOT_CKPT) and not name.endswith(".index"):
        return False
    return name.endswith(_CKPT_SUFFIXES) or bool(_CKPT_WORDS.search(rel))


def _files() -> dict[str, tuple[int, int]]:
    """Checkpoint files (:func:`_is_checkpoint`) under the working directory, or, in an
    isolated run, among what it wrote (:data:`ENV_WRITES`) (links not followed, folders
    still being written left out): ``{path: (size, mtime)}``."""
    out = {}
    top = os.environ.get(ENV_WRITES) or "."
    for root, dirs, files in os.walk(top, followlinks=False):
        dirs[:] = [
            d
            for d in dirs
            if d != "__pycache__" and not any(u in d for u in _UNFINISHED) and not os.path.islink(os.path.join(root, d))
        ]
        for name in files:
            p = os.path.join(root, name)
            try:
                st = os.stat(p, follow_symlinks=False)
            except OSError:
                continue
            if not os.path.islink(p) and _is_checkpoint(os.path.relpath(p, top)):
                out[p] = (st.st_size, st.st_mtime_ns)
    return out


def _new_files() -> bool:
    """Whether a file was created or changed in the working directory since the last look."""
    now = _files()
    before = _state["files"] if _state["files"] is not None else {}
    _state["files"] = now
    return any(before.get(k) != v for k, v in now.items())


def _interrupt(at: str) -> None:
    if _state["done"]:
        return
    _state["done"] = True
    folder = os.environ[ENV_DIR]
    info = {"pid": os.getpid(), "step": _state["step"], "epoch": _state["epoch"], "at": at}
    tmp = os.path.join(folder, "interrupt.json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(info, f)
    os.replace(tmp, os.path.join(folder, "interrupt.json"))
    signalled = os.path.join(folder, "signalled")
    deadline = time.monotonic() + WAIT_S
    # the parent sends the signal, then creates the file: once it is there, the signal
    # has reached this process, and a Python handler runs at the next bytecode
    while not os.path.exists(signalled) and time.monotonic() < deadline:
        time.sleep(0.01)


# --------------------------------------------------------------------------- install


class _PostImport:
    """Runs an installer after ``torch``, ``keras``, ``jax``, ``optax`` or a trainer's module
    (Lightning's, HF transformers') finishes importing."""

    def __init__(self) -> None:
        self.pending = {
            "torch": _install_torch,
            "keras": _install_keras,
            "jax": _install_jax,
            "optax": _install_optax,
            "pytorch_lightning.trainer.trainer": _install_lightning("pytorch_lightning"),
            "lightning.pytorch.trainer.trainer": _install_lightning("lightning.pytorch"),
            "transformers.trainer": _install_transformers,
        }

    def find_spec(self, name, path=None, target=None):
        install = self.pending.pop(name, None)
        if install is None:
            return None
        import importlib.util

        sys.meta_path.remove(self)  # so that find_spec below does not come back here
        try:
            spec = importlib.util.find_spec(name)
        finally:
            if self.pending:
                sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            try:
                install()
            except Exception as exc:  # never break the user's import
                _emit({"e": "error", "where": f"{name} hook", "error": f"{type(exc).__name__}: {exc}"})

        spec.loader.exec_module = exec_module
        return spec


def install() -> bool:
    """Install the step hooks (for frameworks already imported: now). False when
    :data:`ENV_DIR` is unset."""
    if not os.environ.get(ENV_DIR):
        return False
    finder = _PostImport()
    for name in list(finder.pending):
        if name in sys.modules:
            finder.pending.pop(name)()
    if finder.pending:
        sys.meta_path.insert(0, finder)
    if _target()[0] == "checkpoint":
        _state["files"] = _files()
    return True


def main(argv: list[str] | None = None) -> int:
    from .._runtime import capture as _capture

    install()
    return _capture.main(argv)


if __name__ == "__main__":  # keep the state in the importable module, not in __main__
    from fwd9m.check._resume_child import main as _main

    raise SystemExit(_main())
