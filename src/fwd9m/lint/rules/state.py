"""FWD5xx: checkpoints and RNG state."""

from __future__ import annotations

import ast
import re

from .._flow import _FOREIGN, is_test_file, local_function, module_aliases, project_mentions, runs, statements
from .._helpers import TRAINING_CALL, call_name, is_const, kwarg
from .._helpers import walk as _walk
from .._rule import Rule, register
from ._common import is_stateful_random

_RNG_STATE_CALLS = frozenset(
    {
        "torch.get_rng_state",
        "torch.random.get_rng_state",
        "torch.cuda.get_rng_state",
        "torch.cuda.get_rng_state_all",
        "numpy.random.get_state",
        "random.getstate",
        "fwd9m.capture_rng_state",
        "fwd9m.rng.capture_rng_state",
    }
)
_RNG_STATE_METHODS = frozenset({"get_rng_state", "get_state", "getstate", "get_rng_state_all", "capture_rng_state"})
_RNG_WORDS = ("rng", "random", "generator", "seed")
_PICKLERS = frozenset(
    {
        "pickle.dump",
        "pickle.dumps",
        "cloudpickle.dump",
        "cloudpickle.dumps",
        "dill.dump",
        "dill.dumps",
        "joblib.dump",
        "_pickle.dump",
        "_pickle.dumps",
    }
)


def _torch_save_spellings(aliases, ctx) -> set[str]:
    """How ``torch.save`` is spelled in a module with import ``aliases`` (None: this file)."""
    names = aliases if aliases is not None else module_aliases(ctx)
    out = {"torch.save"}
    for local, target in names.items():
        if target == "torch":
            out.add(f"{local}.save")
        elif target == "torch.save":
            out.add(local)
    return out


def _named_save(node, qn) -> bool:
    """``torch.save`` or a call whose name says it saves: the only calls :meth:`_saves`
    looks into (a cheap test first: every call of the file comes here)."""
    if qn == "torch.save":
        return True
    name = qn or (node.func.id if type(node.func) is ast.Name else "")
    return "save" in name.rsplit(".", 1)[-1].lower()


def _mentions_rng(ctx, node) -> bool:
    for n in _walk(node):
        t = type(n)
        if t is ast.Constant and isinstance(n.value, str) and any(w in n.value.lower() for w in _RNG_WORDS):
            return True
        if t is ast.Name and any(w in n.id.lower() for w in _RNG_WORDS):
            return True
        if t is ast.Attribute and (
            n.attr in ("bit_generator", "state") or any(w in n.attr.lower() for w in _RNG_WORDS)
        ):
            return True
        if t is ast.Call and (ctx.qualname(n.func) in _RNG_STATE_CALLS or call_name(n) in _RNG_STATE_METHODS):
            return True
        if t is ast.keyword and n.arg and any(w in n.arg.lower() for w in _RNG_WORDS):
            return True
    return False


#: a resume path somewhere in the project: a checkpoint read back
_RESUMES = r"torch\.load\(|load_state_dict\(|\bresume|load_checkpoint|restore"


#: a project that restores an optimizer's state somewhere resumes training: an optimizer's
#: ``load_state_dict``, a checkpoint read at an optimizer key, ignite's ``load_objects``,
#: a ``resume`` option. SupContrast saves optimizer state but only ever loads the model
#: weights back, for a linear probe: nothing resumes (issue 29, fifth held-out round).
_RESTORES_OPTIMIZER = (
    r"optim\w*\.load_state_dict\(|\[\s*['\"]\w*optim\w*['\"]\s*\]|load_objects\(|load_state\(|"
    r"(?i:resum|restor|restart_from)|load_checkpoint"
)


def _scratch_copy(ctx, node) -> bool:
    """The state is written inside ``with tempfile.TemporaryDirectory() as d:`` (ignite
    caches a scheduler and optimizer there to simulate learning rates and reads it back at
    once): a scratch copy, not a checkpoint a later run resumes from."""
    for w in statements(ctx):
        if type(w) in (ast.With, ast.AsyncWith) and w.lineno < node.lineno <= (w.end_lineno or w.lineno):
            if any(
                type(i.context_expr) is ast.Call
                and ctx.qualname(i.context_expr.func) in ("tempfile.TemporaryDirectory", "tempfile.mkdtemp")
                for i in w.items
            ):
                return True
    return False


def _final_without_resume(ctx, node) -> bool:
    """The checkpoint is written once, after the training loop (a loop before it in the
    same function that runs ``backward``/``step``; itself in no loop), and nothing in the
    project reads a checkpoint back: no run resumes from it, so its RNG state is moot."""
    loops = [n for n in _walk(ctx.tree) if type(n) in (ast.For, ast.While, ast.AsyncFor)]
    if any(n.lineno < node.lineno <= (n.end_lineno or n.lineno) for n in loops):
        return False
    scope = min(
        (
            f
            for f in _walk(ctx.tree)
            if type(f) in (ast.FunctionDef, ast.AsyncFunctionDef)
            and f.lineno <= node.lineno <= (f.end_lineno or f.lineno)
        ),
        key=lambda f: (f.end_lineno or f.lineno) - f.lineno,
        default=ctx.tree,
    )
    trained = any(
        type(n) in (ast.For, ast.While, ast.AsyncFor)
        and (n.end_lineno or n.lineno) < node.lineno
        and re.search(r"\.backward\(|\.step\(", ast.unparse(n))
        for n in _walk(scope)
    )
    return trained and not project_mentions(ctx, _RESUMES)


@register
class CheckpointWithoutRngState(Rule):
    """Saves a training checkpoint without the random-number generator state.

    ## What it does
    Flags `torch.save({...})` of a dict literal that holds an optimizer's state (a
    `*optim*` key not set to None, or an `optimizer.state_dict()` value) but nothing about RNG state (also
    a dict bound to a name first, and one saved through a helper named for saving, of
    this file or a local module, that hands its argument to `torch.save`; not in test
    files, whose checkpoints are fixtures), and
    `tf.train.Checkpoint(optimizer=..., ...)` that tracks no `tf.random.Generator` in a
    file that draws from TensorFlow's global random state (stateful random ops, a
    `shuffle` without seed), unless the script deletes the checkpoint folder before it
    (`tf.io.gfile.rmtree(model_dir)` with `checkpoint_dir` built from `model_dir`):
    such a run starts afresh every time and never resumes. A checkpoint written once
    after training (in no loop), in a project that never reads one back
    (`torch.load`, `load_state_dict`, a resume option), is not flagged either; nor a
    torch checkpoint in a project that never restores an optimizer's state (an
    optimizer's `load_state_dict`, a checkpoint read at an `*optim*` key, ignite's
    `load_objects`, a resume option: nothing resumes from it), nor one written in a
    `tempfile.TemporaryDirectory()` block (a scratch copy read back at once).

    ## Why is this bad
    A run resumed from such a checkpoint restarts every generator from its seed (or
    from fresh entropy), so it replays dropout masks, augmentations and shuffles of the
    first epochs instead of continuing them: the resumed run does not match an
    uninterrupted one.

    ## Example
    ```python
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, path)
    ...
    optimizer.load_state_dict(torch.load(path)["optimizer"])  # --resume
    ```

    ## Fix
    Save the generators too, without pickle:
    `{"model": ..., "optimizer": ..., "rng": fwd9m.capture_rng_state()}` and restore them
    with `fwd9m.restore_rng_state(...)`; in TensorFlow, track a `tf.random.Generator`
    in the checkpoint (`tf.train.Checkpoint(..., rng=generator)`) and draw from it.
    """

    code, name = "FWD501", "checkpoint-without-rng-state"
    triggers = ("save", "Checkpoint", "state_dict")  # state_dict: a dict saved through a helper

    def __init__(self, ctx):
        super().__init__(ctx)
        self.tf_checkpoints = []
        self.defs = None  #: module functions by name, built on first need

    references = (
        "https://docs.pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html",
        "https://www.tensorflow.org/guide/random_numbers#interaction_with_tftrainCheckpoint",
    )
    invalid = (
        "import torch\nif args.resume:\n    opt.load_state_dict(torch.load('c.pt')['optimizer'])\n"
        "torch.save({'model': m.state_dict(), 'optimizer': opt.state_dict()}, 'c.pt')\n",
        "import tensorflow as tf\nds = ds.shuffle(100)\nckpt = tf.train.Checkpoint(model=model, optimizer=opt)\n",
    )
    invalid += (  # DINO / MAE: a dict bound to a name, saved through a wrapper of torch.save
        "import torch\ndef save_on_master(*args, **kwargs):\n    torch.save(*args, **kwargs)\n"
        "def train(m, opt):\n    ckpt = {'model': m.state_dict(), 'optimizer': opt.state_dict()}\n"
        "    ckpt['epoch'] = 3\n    save_on_master(ckpt, 'c.pt')\n"
        "def load(opt):\n    opt.load_state_dict(torch.load('c.pt')['optimizer'])\n",
    )
    valid = (
        # the tutorial deletes its model folder first: it never resumes
        "import tensorflow as tf\nMODEL_DIR = '/tmp/m'\ntf.io.gfile.rmtree(MODEL_DIR)\n"
        "checkpoint_dir = MODEL_DIR + '/ckpt'\nds = ds.shuffle(100)\n"
        "ckpt = tf.train.Checkpoint(model=model, optimizer=opt)\n"
        "ckpt.restore(tf.train.latest_checkpoint(checkpoint_dir))\n",
        "import torch\ndef save_on_master(*args, **kwargs):\n    torch.save(*args, **kwargs)\n"
        "def train(m, opt):\n    ckpt = {'model': m.state_dict(), 'optimizer': opt.state_dict()}\n"
        "    ckpt['rng'] = torch.get_rng_state()\n    save_on_master(ckpt, 'c.pt')\n",
        "import torch\ntorch.save({'model': m.state_dict(), 'optimizer': opt.state_dict(),\n"
        "            'rng': torch.get_rng_state()}, 'c.pt')\n",
        "import torch\ntorch.save(m.state_dict(), 'w.pt')\n",
        "import tensorflow as tf\nckpt = tf.train.Checkpoint(model=model, optimizer=opt, rng=gen)\n",
        # weights for inference: the optimizer slot is None
        "import torch\ntorch.save({'epoch': 3, 'model': m.half(), 'optimizer': None}, 'last.pt')\n",
        "import tensorflow as tf\nx = tf.random.stateless_uniform([2], seed=[1, 2])\n"
        "ckpt = tf.train.Checkpoint(model=model, optimizer=opt)\n",
    )

    def _saves(self, node, qn) -> bool:  # after _named_save
        """``torch.save``, or a wrapper whose body hands its first argument to it (DINO's
        and MAE's ``save_on_master(*args)``): a function of this file or of a local
        module the file imports, one level deep, whose name contains "save"."""
        if qn == "torch.save":
            return True
        name = qn or (node.func.id if type(node.func) is ast.Name else "")
        if "save" not in name.rsplit(".", 1)[-1].lower():
            return False  # only helpers named for saving are looked into (each lookup may read a file)
        if type(node.func) is ast.Name and qn is None:
            if self.defs is None:
                self.defs = {s.name: s for s in getattr(self.ctx.tree, "body", ()) if type(s) is ast.FunctionDef}
            fn, aliases = self.defs.get(node.func.id), None
        elif qn and qn.split(".", 1)[0] not in _FOREIGN:
            found = local_function(self.ctx, qn)
            fn, aliases = found if found else (None, None)
        else:
            return False
        if fn is None:
            return False
        first = fn.args.vararg.arg if fn.args.vararg else (fn.args.args[0].arg if fn.args.args else None)
        spellings = _torch_save_spellings(aliases, self.ctx)
        for n in _walk(fn):
            if type(n) is ast.Call and n.args and ast.unparse(n.func) in spellings:
                a = n.args[0]
                if (type(a) is ast.Starred and type(a.value) is ast.Name and a.value.id == first) or (
                    type(a) is ast.Name and a.id == first
                ):
                    return True
        return False

    def _saved_dict(self, node):
        """The dict literal saved: the argument itself, or the dict a name was bound to in
        the same function (``save_dict = {...}; save(save_dict, path)``), with the keys
        added later by ``save_dict["k"] = v``."""
        arg = node.args[0]
        if type(arg) is ast.Dict:
            return arg, []
        if type(arg) is not ast.Name:
            return None, []
        scope = next(
            (
                f
                for f in statements(self.ctx)
                if type(f) in (ast.FunctionDef, ast.AsyncFunctionDef)
                and f.lineno <= node.lineno <= (f.end_lineno or f.lineno)
                and not any(
                    type(g) in (ast.FunctionDef, ast.AsyncFunctionDef)
                    and g is not f
                    and g.lineno <= node.lineno <= (g.end_lineno or g.lineno)
                    for g in _walk(f)
                )
            ),
            self.ctx.tree,
        )
        found, extra = None, []
        for n in _walk(scope):
            if type(n) is ast.Assign and n.lineno < node.lineno:
                for t in n.targets:
                    if type(t) is ast.Name and t.id == arg.id:
                        found = n.value if type(n.value) is ast.Dict else None
                    elif type(t) is ast.Subscript and type(t.value) is ast.Name and t.value.id == arg.id:
                        extra.append(n)
        return found, extra

    def visit_Call(self, node, qn):
        if (
            node.args
            and _named_save(node, qn)
            and (qn == "torch.save" or self.ctx.imports_any("torch"))
            and not is_test_file(self.ctx)
            and self._saves(node, qn)
        ):
            d, extra = self._saved_dict(node)
            if d is None:
                return
            optim = any(  # an optimizer key holding None (yolov5's classifier) saves no optimizer state
                (type(k) is ast.Constant and isinstance(k.value, str) and "optim" in k.value.lower())
                and not (type(v) is ast.Constant and v.value is None)
                for k, v in zip(d.keys, d.values)
            ) or any(
                type(v) is ast.Call
                and type(v.func) is ast.Attribute
                and v.func.attr == "state_dict"
                and "optim" in ast.unparse(v.func.value).lower()
                for v in d.values
            )
            if (
                optim
                and not _mentions_rng(self.ctx, d)
                and not any(_mentions_rng(self.ctx, e) for e in extra)
                and not _final_without_resume(self.ctx, node)
                and not _scratch_copy(self.ctx, node)
                and project_mentions(self.ctx, _RESTORES_OPTIMIZER)
            ):
                self.report(
                    node,
                    "training checkpoint without RNG state: a resumed run restarts the "
                    "generators; add 'rng': fwd9m.capture_rng_state()",
                )
        elif (
            qn in ("tensorflow.train.Checkpoint", "tensorflow.compat.v2.train.Checkpoint")
            and any(k.arg == "optimizer" for k in node.keywords)
            and not _mentions_rng(self.ctx, node)
        ):
            self.tf_checkpoints.append(node)

    def finish(self):
        # TF: only when the file draws from hidden global state (stateful random ops,
        # unseeded shuffles); stateless ops and Keras 3 SeedGenerators need no extra state
        if not self.tf_checkpoints:
            return
        stateful = next((c for qn, calls in self.ctx.calls.items() if is_stateful_random(qn) for c in calls), None)
        if stateful is None:
            stateful = next(
                (
                    c
                    for c in self.ctx.methods.get("shuffle", ())
                    if not any(k.arg == "seed" for k in c.keywords) and len(c.args) < 2
                ),
                None,
            )
        if stateful is None:
            return
        for node in self.tf_checkpoints:
            if self._cleared_before(node):
                continue  # the run deletes its checkpoint folder first: it never resumes
            self.report(
                node,
                f"tf.train.Checkpoint without random state while line {stateful.lineno} "
                "draws from the global generator: a resumed run replays the first epochs' "
                "randomness; use a tf.random.Generator tracked in the checkpoint (rng=generator) "
                "or stateless ops seeded by (seed, epoch)",
            )

    def _cleared_before(self, node) -> bool:
        """A script that deletes a folder (``shutil.rmtree``, ``tf.io.gfile.rmtree``) at
        module level before making the checkpoint starts afresh on every run (a tutorial's
        ``apply_clean()``): there is nothing to resume from."""
        ckpt_names = set()  # names the checkpoint paths are built from
        for n in statements(self.ctx):
            if type(n) is ast.Assign and any(
                "ckpt" in ast.unparse(t) or "checkpoint" in ast.unparse(t) for t in n.targets
            ):
                ckpt_names |= {x.id for x in _walk(n) if type(x) is ast.Name}
        for qn in ("shutil.rmtree", "tensorflow.io.gfile.rmtree"):
            for c in self.ctx.calls.get(qn, ()):
                deleted = {x.id for a in c.args[:1] for x in _walk(a) if type(x) is ast.Name}
                if c.lineno < node.lineno and deleted & ckpt_names and runs(self.ctx, c):
                    return True
        return False


@register
class RngStatePickled(Rule):
    """Saves random-number generator state with pickle.

    ## What it does
    Flags `pickle.dump`/`dumps` (also `cloudpickle`, `dill`, `joblib.dump`) of a value
    that contains RNG state: `torch.get_rng_state()`, `np.random.get_state()`,
    `random.getstate()`, `rng.bit_generator.state`, or a variable assigned from one.

    ## Why is this bad
    A pickle ties the state to the classes and module layout of the library version
    that wrote it, so it may not load (or load differently) after an upgrade, and
    loading a pickle runs arbitrary code, which many checkpoint loaders now refuse
    (`torch.load(weights_only=True)` is the default since PyTorch 2.6).

    ## Example
    ```python
    pickle.dump({"numpy": np.random.get_state()}, f)
    ```

    ## Fix
    `fwd9m.save_rng_state(path)` / `fwd9m.load_rng_state(path)` (a plain, versioned
    format), or store the state arrays with `np.savez` / safetensors.
    """

    code, name = "FWD502", "rng-state-pickled"
    triggers = ("pickle", "cloudpickle", "_pickle", "joblib", "dill")
    fix_code = "fwd9m.save_rng_state(path)"
    references = (
        "https://docs.python.org/3/library/pickle.html",
        "https://docs.pytorch.org/docs/stable/generated/torch.load.html",
    )
    invalid = (
        "import pickle, random\npickle.dump(random.getstate(), f)\n",
        "import pickle, numpy as np\nstate = {'np': np.random.get_state()}\npickle.dump(state, f)\n",
    )
    valid = ("import pickle\npickle.dump({'epoch': 3}, f)\n",)

    def __init__(self, ctx):
        super().__init__(ctx)
        self.tainted: set[str] = set()

    def _has_state(self, node) -> bool:
        for n in _walk(node):
            if type(n) is ast.Call and (
                self.ctx.qualname(n.func) in _RNG_STATE_CALLS
                or call_name(n) in ("get_rng_state", "get_rng_state_all", "capture_rng_state")
            ):
                return True
            if (
                type(n) is ast.Attribute
                and n.attr == "state"
                and type(n.value) is ast.Attribute
                and n.value.attr == "bit_generator"
            ):
                return True
            if type(n) is ast.Name and n.id in self.tainted:
                return True
        return False

    def visit_Assign(self, node):
        if self._has_state(node.value):
            self.tainted.update(t.id for t in node.targets if type(t) is ast.Name)

    def visit_Call(self, node, qn):
        if qn in _PICKLERS and node.args and self._has_state(node.args[0]):
            self.report(
                node,
                "RNG state saved with pickle: version-bound and unsafe to load; use "
                "fwd9m.save_rng_state(path) or np.savez",
            )


#: what restores optimizer and RNG state with a Keras fit, or the whole model
_FULL_RESUME = ("BackupAndRestore", "RngStateCheckpoint", "load_model")
_KERAS_TRAIN = ("fit", "fit_generator")  #: Keras training loops (fit_generator: Keras 2)
_RESUME_WORDS = ("ckpt", "checkpoint", "latest", "resume", "restore", "last")


@register
class KerasResumeFromWeightsOnly(Rule):
    """Resumes Keras training from weights only.

    ## What it does
    Flags `model.load_weights(...)` of a checkpoint (a path or argument that names a
    checkpoint, `tf.train.latest_checkpoint(...)`, a `resume` flag, or a file the script
    writes with a `ModelCheckpoint` callback or a subclass of it, whole model or weights
    only) before any training call in a file that trains with `fit` or `fit_generator`,
    when nothing in the file restores the rest (`BackupAndRestore`,
    `fwd9m.callbacks.RngStateCheckpoint`, `load_model` of a full `.keras` file before the
    last training call). Loading pretrained weights to fine-tune (a path that names no
    checkpoint), and loading after a `fit` of the same file (a stage of the same run),
    are not flagged.

    ## Why is this bad
    Weights are only part of the training state: the optimizer's moments and step
    counter (Adam, learning-rate schedules) and the random state of dropout, shuffles
    and augmentation restart from scratch, so a resumed run follows a different path
    from an uninterrupted one (Keras documents `BackupAndRestore` for resuming: it
    saves the optimizer with the weights).

    ## Example
    ```python
    model.load_weights(tf.train.latest_checkpoint(ckpt_dir))
    model.fit(ds, epochs=10, initial_epoch=start)
    ```

    ## Fix
    `model.fit(ds, epochs=10, callbacks=[keras.callbacks.BackupAndRestore(ckpt_dir),
    fwd9m.callbacks.RngStateCheckpoint(ckpt_dir + "/rng.npz")])`, or save and load the
    whole model (`model.save("m.keras")`, `keras.models.load_model("m.keras")`).
    """

    code, name = "FWD503", "keras-resume-from-weights-only"
    triggers = ("load_weights",)
    fix_code = (
        "callbacks=[keras.callbacks.BackupAndRestore(ckpt_dir), "
        "fwd9m.callbacks.RngStateCheckpoint(ckpt_dir + '/rng.npz')]"
    )
    references = (
        "https://keras.io/api/callbacks/backup_and_restore/",
        "https://www.tensorflow.org/guide/keras/serialization_and_saving",
    )
    invalid = (
        "import tensorflow as tf\nmodel.load_weights(tf.train.latest_checkpoint(ckpt_dir))\n"
        "model.fit(ds, epochs=10, initial_epoch=start)\n",
        "import keras\nif args.resume:\n    model.load_weights(args.weights)\nmodel.fit(ds, epochs=5)\n",
        "import keras\ncb = keras.callbacks.ModelCheckpoint('w.weights.h5', save_weights_only=True)\n"
        "model.load_weights('w.weights.h5')\nmodel.fit(ds, callbacks=[cb])\n",
        # keras-yolo3: a ModelCheckpoint subclass saving the whole model, its file loaded
        # with load_weights in one function, Keras 2 fit_generator in another, and
        # load_model of the trained file only after training
        "import keras, os\nfrom callbacks import CustomModelCheckpoint\n"
        "def create_callbacks(saved_weights_name):\n"
        "    return [CustomModelCheckpoint(filepath=saved_weights_name, save_best_only=True)]\n"
        "def create_model(saved_weights_name):\n    model = make()\n"
        "    if os.path.exists(saved_weights_name):\n        model.load_weights(saved_weights_name)\n"
        "    return model\n"
        "def main(cfg):\n    model = create_model(cfg['w'])\n"
        "    model.fit_generator(gen, callbacks=create_callbacks(cfg['w']))\n"
        "    best = keras.models.load_model(cfg['w'])\n",
    )
    valid = (
        # two-stage training in one run: the load after the first fit repeats with the run
        "import keras\ncb = keras.callbacks.ModelCheckpoint('best.h5', save_best_only=True)\n"
        "model.fit(ds, callbacks=[cb])\nmodel.load_weights('best.h5')\nmodel.fit(ds, epochs=3)\n",
        "import keras\nmodel.load_weights('imagenet_backbone.h5')\nmodel.fit(ds, epochs=5)\n",  # fine-tuning
        "import keras\nmodel.load_weights(tf.train.latest_checkpoint(d))\nmodel.evaluate(ds)\n",
        "import keras\nmodel.load_weights('ckpt/w.h5')\n"
        "model.fit(ds, callbacks=[keras.callbacks.BackupAndRestore('ckpt')])\n",
    )

    def __init__(self, ctx):
        super().__init__(ctx)
        self.loads: list[ast.Call] = []
        self.weight_files: set[str] = set()

    def visit_Call(self, node, qn):
        name = call_name(node)
        if name == "load_weights" and type(node.func) is ast.Attribute and node.args:
            self.loads.append(node)
        elif name and name.endswith("ModelCheckpoint"):
            # the file this run's checkpoint callback (or a subclass, keras-yolo3's
            # CustomModelCheckpoint) writes: load_weights of it restores only the weights,
            # whether the callback saved weights only or the whole model
            path = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "filepath"), None)
            if path is not None:
                self.weight_files.add(ast.unparse(path))

    def _checkpoint(self, call) -> bool:
        arg = ast.unparse(call.args[0])
        if arg in self.weight_files or any(w in arg.lower() for w in _RESUME_WORDS):
            return True
        # under `if args.resume:` / `if restore_from:`
        for n in statements(self.ctx):
            if (
                type(n) is ast.If
                and any(w in ast.unparse(n.test).lower() for w in ("resume", "restore"))
                and any(c is call for st in n.body for c in _walk(st))
            ):
                return True
        return False

    def finish(self):
        ctx = self.ctx
        if not self.loads or not ctx.imports_any("keras", "tensorflow", "tf_keras"):
            return
        fits = [f for m in _KERAS_TRAIN for f in ctx.methods.get(m, ())]
        if not fits:
            return
        # a full restore counts when it can come before training: load_model after the
        # last fit loads the trained model for evaluation, not to resume
        last_fit = max(f.lineno for f in fits)
        restores = [(m, c) for m in _FULL_RESUME for c in ctx.methods.get(m, ())]
        restores += [(qn.rsplit(".", 1)[-1], c) for qn, cs in ctx.calls.items() for c in cs]
        if any(m in _FULL_RESUME and (m != "load_model" or c.lineno < last_fit) for m, c in restores):
            return
        first_fit = min(f.lineno for f in fits)
        for call in self.loads:
            # a load before any training in the file: one after a fit restores a stage
            # of this same run (two-stage training), which repeats with the run
            if call.lineno < first_fit and self._checkpoint(call):
                self.report(
                    call,
                    "resumes fit from weights only: the optimizer state (moments, step) and "
                    "the random state (dropout, shuffles) restart, so the resumed run differs from "
                    "an uninterrupted one; use keras.callbacks.BackupAndRestore with "
                    "fwd9m.callbacks.RngStateCheckpoint, or save and load the whole model (.keras)",
                )


#: what a name or key of the rest of a training state says (an optimizer, its LR scheduler,
#: AMP's loss scaler)
_OPTIM_WORD = re.compile(r"optim|(?:^|_)opt(?:$|_|\d)|solver", re.I)
_SCHED_WORD = re.compile(r"sched|lr_s", re.I)
_SCALER_WORD = re.compile(r"scaler|(?:^|_)amp(?:$|_)", re.I)
#: a step count read from a checkpoint: where a resumed run starts
_STEP_KEY = re.compile(r"epoch|step|iter", re.I)
_RESUME_WORD = re.compile(r"resum|restart", re.I)
#: calls that restore a whole training state (accelerate, ignite, HF Trainer, Lightning)
_RESTORES_ALL = re.compile(r"\.load_state\(|load_objects\(|resume_from_checkpoint|\bckpt_path\s*=")
_SCHEDULER_MAKERS = frozenset(
    {
        "create_scheduler",
        "create_scheduler_v2",
        "build_scheduler",
        "build_lr_scheduler",
        "get_scheduler",
        "get_linear_schedule_with_warmup",
        "get_cosine_schedule_with_warmup",
        "CosineLRScheduler",
    }
)
_SCALER_MAKERS = frozenset({"GradScaler", "NativeScaler", "NativeScalerWithGradNormCount"})
_DEFS_ONLY = (ast.FunctionDef, ast.AsyncFunctionDef)


def _scope_of(tree, line: int):
    """The innermost function holding ``line``, or the module."""
    best = tree
    for n in _walk(tree):
        if type(n) in _DEFS_ONLY and n.lineno <= line <= (n.end_lineno or n.lineno):
            if best is tree or n.lineno >= best.lineno:
                best = n
    return best


def _key(node) -> str | None:
    """The string key read: ``x["k"]`` or ``x.get("k", ...)``."""
    if type(node) is ast.Subscript and type(node.slice) is ast.Constant and isinstance(node.slice.value, str):
        return node.slice.value
    if (
        type(node) is ast.Call
        and type(node.func) is ast.Attribute
        and node.func.attr == "get"
        and node.args
        and type(node.args[0]) is ast.Constant
        and isinstance(node.args[0].value, str)
    ):
        return node.args[0].value
    return None


def _reads_key(tree, word) -> bool:
    """Whether a checkpoint's entry named for ``word`` is read anywhere (not written)."""
    for n in _walk(tree):
        k = _key(n)
        if k is not None and word.search(k) and not (type(n) is ast.Subscript and type(n.ctx) is not ast.Load):
            return True
    return False


def _checkpoint_source(scope, call, load_ids: set[int]):
    """``(names, loads)`` when ``call``'s argument comes from ``torch.load`` in ``scope``:
    the names bound from a loaded checkpoint (``ckpt``, ``state = ckpt["model"]``) and the
    ``torch.load`` calls of the scope; None when it does not."""
    loads = [n for n in _walk(scope) if type(n) is ast.Call and id(n) in load_ids]
    if not loads:
        return None
    tainted: set[str] = set()
    assigns = [n for n in _walk(scope) if type(n) in (ast.Assign, ast.AnnAssign, ast.With)]
    grew = True
    while grew:
        grew = False
        for n in assigns:
            if type(n) is ast.With:
                pairs = [(i.context_expr, i.optional_vars) for i in n.items if i.optional_vars is not None]
            else:
                pairs = [(n.value, t) for t in (n.targets if type(n) is ast.Assign else [n.target])]
            for value, target in pairs:
                if value is None or not any(
                    (type(v) is ast.Call and id(v) in load_ids) or (type(v) is ast.Name and v.id in tainted)
                    for v in _walk(value)
                ):
                    continue
                new = {t.id for t in _walk(target) if type(t) is ast.Name} - tainted
                if new:
                    tainted |= new
                    grew = True
    arg = call.args[0]
    if any(
        (type(v) is ast.Call and id(v) in load_ids) or (type(v) is ast.Name and v.id in tainted) for v in _walk(arg)
    ):
        return tainted, loads
    return None


def _is_resume(scope, call, source) -> bool:
    """Whether the load in ``scope`` resumes a run: a step count read from the checkpoint
    (or parsed from its path) into a variable, a resume word in the loaded path, an enclosing ``if`` test or the
    function's name, or an enclosing ``if`` on an epoch/step/iteration option."""
    tainted, loads = source
    for st in _walk(scope):
        if type(st) not in (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return) or st.value is None:
            continue
        for n in _walk(st.value):
            k = _key(n)
            if k is None or not _STEP_KEY.search(k):
                continue
            base = n.value if type(n) is ast.Subscript else n.func.value
            if (type(base) is ast.Name and base.id in tainted) or any(base is c for c in loads):
                return True
    if any(_RESUME_WORD.search(ast.unparse(a)) for c in loads for a in (*c.args, *c.keywords)):
        return True
    # a step count parsed from the loaded path: start_iter = int(opt.saved_model.split("_")[-1][:-4])
    paths = {
        ast.unparse(n) for c in loads for a in c.args[:1] for n in _walk(a) if type(n) in (ast.Name, ast.Attribute)
    }
    for st in _walk(scope):
        if (
            type(st) is ast.Assign
            and any(_STEP_KEY.search(ast.unparse(t)) for t in st.targets)
            and any(type(n) in (ast.Name, ast.Attribute) and ast.unparse(n) in paths for n in _walk(st.value))
        ):
            return True
    if type(scope) in _DEFS_ONLY and _RESUME_WORD.search(scope.name):
        return True
    for n in _walk(scope):
        if type(n) is ast.If and n.lineno < call.lineno <= (n.end_lineno or n.lineno):
            in_body = any(call.lineno >= s.lineno and call.lineno <= (s.end_lineno or s.lineno) for s in n.body)
            test = ast.unparse(n.test)
            if in_body and (_RESUME_WORD.search(test) or _STEP_KEY.search(test)):
                return True
    return False


def _restored(ctx, word) -> bool:
    """A ``load_state_dict`` of something named for ``word`` (its receiver or the entry it
    loads), or a checkpoint entry named for it read back."""
    for c in ctx.methods.get("load_state_dict", ()):
        if type(c.func) is ast.Attribute and (
            word.search(ast.unparse(c.func.value)) or any(word.search(ast.unparse(a)) for a in c.args)
        ):
            return True
    return _reads_key(ctx.tree, word)


def _stateless_optimizers(ctx) -> bool:
    """Every optimizer the file builds is ``torch.optim.SGD`` without momentum (no
    ``momentum=``, or 0; the pytorch/examples DDP tutorial's ``SGD(params, lr=1e-3)``): it
    keeps no state, so a resume without it loses nothing. False when the file builds none."""
    built = [(qn, c) for qn, cs in ctx.calls.items() if qn.startswith("torch.optim.") for c in cs]
    built = [(qn, c) for qn, c in built if "lr_scheduler" not in qn and qn.rsplit(".", 1)[-1][:1].isupper()]
    if not built:
        return False
    for qn, c in built:
        momentum = kwarg(c, "momentum", c.args[2] if len(c.args) > 2 else None)
        if qn != "torch.optim.SGD" or not (momentum is None or is_const(momentum, 0) or is_const(momentum, 0.0)):
            return False
    return True


def _given_start(ctx, scheds) -> bool:
    """A scheduler built with the run's start value (the first bound of a ``range(start,
    end)`` loop, or a name the start epoch is read into): PyTorch-GAN's
    ``LambdaLR(optimizer, lr_lambda=LambdaLR(n_epochs, opt.epoch, decay).step)`` offsets
    its schedule by ``opt.epoch``, so a resumed run takes up the schedule where it was."""
    starts = {
        ast.unparse(c.args[0])
        for c in ctx.calls.get("range", ())
        if len(c.args) >= 2 and type(c.args[0]) is not ast.Constant
    }
    return any(ast.unparse(n) in starts for c in scheds for n in _walk(c) if type(n) in (ast.Name, ast.Attribute))


def _missing_state(ctx) -> list[str]:
    """The parts of the training state besides the weights that the file never restores:
    the optimizer, an LR scheduler it builds (unless positioned by ``last_epoch=`` or
    stepped with the epoch), an AMP loss scaler it builds (unless disabled)."""
    missing = [] if _restored(ctx, _OPTIM_WORD) or _stateless_optimizers(ctx) else ["optimizer"]
    scheds = [
        c
        for qn, cs in ctx.calls.items()
        for c in cs
        if qn.startswith("torch.optim.lr_scheduler.") or qn.rsplit(".", 1)[-1] in _SCHEDULER_MAKERS
    ] + [c for m in _SCHEDULER_MAKERS for c in ctx.methods.get(m, ())]
    if scheds and not (
        _restored(ctx, _SCHED_WORD)
        or any(kwarg(c, "last_epoch") is not None for c in scheds)
        or _given_start(ctx, scheds)
        or any(
            c.args and type(c.func) is ast.Attribute and _SCHED_WORD.search(ast.unparse(c.func.value))
            for c in ctx.methods.get("step", ())
        )
    ):
        missing.append("LR scheduler")
    scalers = [
        c
        for qn, cs in ctx.calls.items()
        for c in cs
        if qn.rsplit(".", 1)[-1] in _SCALER_MAKERS
        and (kwarg(c, "enabled") is None or (type(kwarg(c, "enabled")) is ast.Constant and kwarg(c, "enabled").value))
    ]
    if scalers and not _restored(ctx, _SCALER_WORD):
        missing.append("AMP GradScaler")
    return missing


@register
class TorchResumeFromWeightsOnly(Rule):
    """Resumes PyTorch training from the model weights without the optimizer state.

    ## What it does
    Flags `model.load_state_dict(...)` of a checkpoint read with `torch.load` (directly,
    or through names bound from it: `ckpt["state_dict"]`) when the load is a resume, in a
    file that trains (a `backward`/`optimizer.step` call, or it builds a `torch.optim`
    optimizer) and that does not restore the optimizer's state (no optimizer
    `load_state_dict`, no checkpoint entry named for the optimizer read back), or restores
    it but builds an LR scheduler or AMP `GradScaler` whose state it never restores
    (no `load_state_dict` of it, no entry named for it, no `last_epoch=`, no
    `scheduler.step(epoch)`, not built with the loop's start epoch). An optimizer that
    keeps no state (every one the file builds is `SGD` without momentum) loses nothing.
    A resume is a load whose function takes a step count from the checkpoint
    (`start_epoch = ckpt["epoch"]`) or parses one from its path, or whose path, enclosing `if` test or
    function name says resume/restart, or which runs under an `if` on an epoch, step or
    iteration option (`if opt.epoch != 0:`). Loading pretrained weights to fine-tune (no
    step count taken, no resume meaning), a load with `strict=False` (a partial or
    backbone checkpoint), and files that restore through a framework that restores the
    whole state (accelerate's `load_state`, ignite's `load_objects`, the Hugging Face
    Trainer's `resume_from_checkpoint`, Lightning's `ckpt_path=`) are not flagged.

    ## Why is this bad
    The optimizer's state is part of the training state: SGD's momentum buffers, Adam's
    moment estimates and step count, the LR scheduler's position and AMP's loss scale
    restart from scratch, so the updates after a resume differ from those of the
    uninterrupted run and the two runs end with different weights
    (PyTorch's checkpoint recipe saves and loads `optimizer.state_dict()` with the model's).

    ## Example
    ```python
    ckpt = torch.load(args.resume)
    model.load_state_dict(ckpt["state_dict"])
    start_epoch = ckpt["epoch"]
    ```

    ## Fix
    Save `optimizer.state_dict()` (and `scheduler.state_dict()`, `scaler.state_dict()`)
    in the checkpoint and restore each with `load_state_dict` when resuming; with the RNG
    state too (`fwd9m.capture_rng_state()`, see FWD501).
    """

    code, name = "FWD504", "torch-resume-from-weights-only"
    triggers = ("load_state_dict",)
    requires = ("torch",)
    fix_code = "optimizer.load_state_dict(ckpt['optimizer'])"
    references = (
        "https://docs.pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html",
        "https://docs.pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
    )
    invalid = (
        "import torch\nopt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
        "if args.resume:\n    ckpt = torch.load(args.resume)\n"
        "    model.load_state_dict(ckpt['state_dict'])\n    start_epoch = ckpt['epoch']\n"
        "for epoch in range(start_epoch, 90):\n    loss.backward()\n    opt.step()\n",
        # the optimizer restored, its scheduler restarted
        "import torch\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "sched = torch.optim.lr_scheduler.MultiStepLR(opt, [30, 60])\n"
        "ckpt = torch.load('last.pt')\nmodel.load_state_dict(ckpt['model'])\n"
        "opt.load_state_dict(ckpt['optimizer'])\nstart_epoch = ckpt['epoch'] + 1\n"
        "loss.backward()\n",
    )
    valid = (
        # fine-tuning from pretrained weights: no step count, no resume
        "import torch\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model.load_state_dict(torch.load('imagenet.pth'))\nloss.backward()\n",
        "import torch\nopt = torch.optim.Adam(model.parameters())\n"
        "ckpt = torch.load(args.resume)\nmodel.load_state_dict(ckpt['model'])\n"
        "opt.load_state_dict(ckpt['optimizer'])\nstart_epoch = ckpt['epoch']\nloss.backward()\n",
        # an evaluation script: it trains nothing
        "import torch\nckpt = torch.load(args.resume)\nmodel.load_state_dict(ckpt['model'])\nprint(ckpt['epoch'])\n",
    )

    def finish(self):
        ctx = self.ctx
        tree = ctx.tree
        loads = ctx.calls.get("torch.load")
        if tree is None or not loads or is_test_file(ctx) or _RESTORES_ALL.search(ctx.text):
            return
        if not (
            TRAINING_CALL.search(ctx.text)
            or any(qn.startswith("torch.optim.") and "lr_scheduler" not in qn for qn in ctx.calls)
        ):
            return
        by_scope: dict[int, ast.Call] = {}  # the last resume load of each function: the weights it continues from
        load_ids = {id(c) for c in loads}
        for call in ctx.methods.get("load_state_dict", ()):
            strict = kwarg(call, "strict")
            if type(call.func) is not ast.Attribute or not call.args or not (strict is None or is_const(strict, True)):
                continue  # strict=False: a partial (backbone, pretrained) checkpoint
            receiver = ast.unparse(call.func.value)
            if _OPTIM_WORD.search(receiver) or _SCHED_WORD.search(receiver) or _SCALER_WORD.search(receiver):
                continue
            scope = _scope_of(tree, call.lineno)
            source = _checkpoint_source(scope, call, load_ids)
            if source is not None and _is_resume(scope, call, source):
                by_scope[id(scope)] = call
        missing = _missing_state(ctx) if by_scope else []
        if not missing:
            return
        lost = " or ".join(missing)
        what = (
            f"from the model weights only (no {lost} state)"
            if missing[0] == "optimizer"
            else f"without the {lost} state"
        )
        for call in by_scope.values():
            self.report(
                call,
                f"resumes training {what}: the rest restarts, so the resumed run differs from an "
                "uninterrupted one; save and restore optimizer.state_dict() (and the scheduler's "
                "and scaler's) with the weights",
            )
