"""Every lint rule's own examples (invalid ones must give its code, valid ones must not),
its documentation, the rule families, and the generated docs page."""

from __future__ import annotations

from pathlib import Path

import pytest

from fwd9m import lint
from fwd9m.lint import SECTIONS, Config

RULES = lint.all_rules()
#: the opt-in catalog rules (FWD703, FWD704) too
_OPT_IN = Config(select=["ALL"])


def _cases():
    for code, rule in RULES.items():
        for i, src in enumerate(rule.invalid):
            yield pytest.param(code, src, True, id=f"{code}-invalid-{i}")
        for i, src in enumerate(rule.valid):
            yield pytest.param(code, src, False, id=f"{code}-valid-{i}")


@pytest.mark.parametrize("code,source,flagged", list(_cases()))
def test_rule_examples(code, source, flagged):
    found = [f for f in lint.lint_source(source, "example.py", Config(select=[code])) if f.code == code]
    if flagged:
        assert found, f"{code} missed its invalid example:\n{source}"
        assert all(f.message and f.line >= 1 and f.col >= 1 for f in found)
    else:
        assert not found, f"{code} flagged its valid example:\n{source}\n{found}"


def test_at_least_30_rules_in_every_family():
    assert len(RULES) >= 30
    families = {code[:4] for code in RULES}
    assert families >= {"FWD1", "FWD2", "FWD3", "FWD4", "FWD5", "FWD6", "FWD7"}
    names = [r.name for r in RULES.values()]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("code", list(RULES))
def test_rule_documented(code):
    rule = RULES[code]
    doc = rule.doc()
    positions = [doc.find(f"## {s}") for s in SECTIONS]
    assert all(p >= 0 for p in positions), f"{code} docstring lacks a section of {SECTIONS}"
    assert positions == sorted(positions)
    assert rule.summary()
    assert all(u.startswith("https://") for u in rule.references)
    catalog_rule_without_entries = code.startswith("FWD7") and "has 0 such" in doc
    if not catalog_rule_without_entries:
        assert rule.invalid, f"{code} has no invalid example"
    assert rule.valid, f"{code} has no valid example"


def test_docs_page_is_up_to_date():
    from fwd9m.lint import docs

    assert docs.DEFAULT_PATH.exists(), "run `python -m fwd9m.lint.docs`"
    assert docs.DEFAULT_PATH.read_text(encoding="utf-8") == docs.render(), (
        "docs/rules.md is out of date: run `python -m fwd9m.lint.docs`"
    )


def test_catalog_rules_are_generated_from_the_catalog():
    """FWD7xx match exactly the catalog's op symbols: no op list is written by hand."""
    from fwd9m import catalog
    from fwd9m.lint.rules import catalog_ops

    for framework, (code, _, _) in catalog_ops.FRAMEWORK_CODES.items():
        idx = catalog_ops._index(framework)
        version = catalog.installed_version(framework)
        expected = set()
        for e in catalog.entries(framework):
            if (
                e.kind == "op"
                and (version is None or e.applies_to(version))
                and e.behaviour_at(version) != "not-applicable"
            ):
                expected |= {
                    catalog_ops._resolved(s).rsplit(".", 1)[-1]
                    for s in e.symbols
                    if not s.rsplit(".", 1)[-1].startswith("__")
                }
        assert set(RULES[code].triggers) <= expected | {"<no catalog entries>"}
        assert {s.rsplit(".", 1)[-1] for s in idx.functions} | set(idx.methods) <= expected


def test_catalog_finding_carries_the_catalog_fix():
    src = "import torch\ntorch.manual_seed(0)\nx = x.cuda()\ny = torch.index_add(x, 0, i, s)\n"
    (f,) = [f for f in lint.lint_source(src, "t.py", _OPT_IN) if f.code == "FWD703"]
    assert "catalog torch.index-add" in f.message
    assert f.fix == "torch.use_deterministic_algorithms(True)"
    enabled = src.replace("torch.manual_seed(0)\n", "torch.manual_seed(0)\ntorch.use_deterministic_algorithms(True)\n")
    assert not [f for f in lint.lint_source(enabled, "t.py", _OPT_IN) if f.code == "FWD703"]


def test_catalog_rules_follow_the_installed_version(monkeypatch):
    """Entries are filtered by the installed framework version; with none installed,
    every version counts."""
    from fwd9m import catalog
    from fwd9m.lint.rules import catalog_ops

    entries = [e for e in catalog.entries("torch") if e.kind == "op"]
    monkeypatch.setattr(catalog, "installed_version", lambda fw: None)
    everything = catalog_ops._Index("torch")
    assert everything.version is None
    assert {e.id for e, _, _ in everything.entries} == {e.id for e in entries}
    monkeypatch.setattr(catalog, "installed_version", lambda fw: "0.1")  # before any entry's range
    old = catalog_ops._Index("torch")
    assert {e.id for e, _, _ in old.entries} == {
        e.id for e in entries if e.applies_to("0.1") and e.behaviour_at("0.1") != "not-applicable"
    }


def test_set_order_reaching_output_is_flagged_where_it_happens():
    """FWD402 on the scripts that ``fwd9m check`` and ``fwd9m debug`` run: the float
    accumulation over a set of strings is reported at the set, ``next(iter(words))``
    inside ``print`` where it is; the set in the vocabulary script keeps its ``# noqa``."""
    data = Path(__file__).parent / "data"
    only = Config(select=["FWD402"])
    found = lint.lint_paths([data / "check" / "python_set_order.py"], only).findings
    assert [(f.code, f.line) for f in found] == [("FWD402", 3), ("FWD402", 7)], found
    assert "next(iter(...))" in found[1].message and "'words'" in found[1].message
    assert not lint.lint_paths([data / "debug" / "torch_set_vocab.py"], only).findings


def test_seed_after_use_says_which_line_to_move_where():
    """FWD102's fix is written for the line: move the seeding call above the first draw."""
    from fwd9m.lint import lint_source

    src = (
        "import keras\ndef build():\n    return keras.Sequential([keras.layers.Dense(3)])\n"
        "def main():\n    m = build()\n    keras.utils.set_random_seed(0)\n"
    )
    found = [f for f in lint_source(src, "t.py", Config(select=["FWD102"])) if f.code == "FWD102"]
    assert found and found[0].fix == "# move line 6 (keras.utils.set_random_seed) above line 5", found


# -- FWD7xx: a call is flagged only when the catalog entry's conditions can hold ----------
_TORCH_GPU = "import torch\ntorch.manual_seed(0)\nx = x.cuda()\n"


@pytest.mark.parametrize(
    "body",
    [
        # nll_loss alerts only in the spatial CUDA kernel (4-D input) with mean/sum reduction
        "loss = torch.nn.functional.cross_entropy(logits, y)\nloss.backward()\n",
        "crit = torch.nn.CrossEntropyLoss()\n",
        # index_copy is nondeterministic only with repeated indices
        "y = x.index_copy(0, pos, v)\n",
        # backward-only entry in a file that runs no backward pass
        "pool = torch.nn.AdaptiveAvgPool2d((1, 1))\ny = pool(x)\n",
        # cudnn.deterministic = True fixes the convolution entry
        "torch.backends.cudnn.deterministic = True\nconv = torch.nn.Conv2d(3, 8, 3)\n",
        # a tensor made on the CPU in the call itself (DINO's MultiCropWrapper): no CUDA kernel
        "idx = torch.cumsum(torch.unique_consecutive(torch.tensor([3, 3, 5]), return_counts=True)[1], 0)\n",
    ],
)
def test_catalog_torch_conditions_rule_out(body):
    assert "FWD703" not in [f.code for f in lint.lint_source(_TORCH_GPU + body, "train.py", _OPT_IN)]


def test_catalog_backward_entry_needs_a_backward_pass():
    src = _TORCH_GPU + "pool = torch.nn.AdaptiveAvgPool2d((7, 7))\nloss = pool(x).sum()\nloss.backward()\n"
    (f,) = [f for f in lint.lint_source(src, "train.py", _OPT_IN) if f.code == "FWD703"]
    assert "torch.adaptive-avg-pool-backward" in f.message


def test_catalog_gather_is_not_a_scatter_without_gradients():
    src = "import jax\nimport jax.numpy as jnp\nkey = jax.random.key(0)\ny = jnp.take(x, i, axis=0)\n"
    assert "FWD704" not in [f.code for f in lint.lint_source(src, "t.py", _OPT_IN)]
    grad = src + "g = jax.grad(lambda p: jnp.take(p, i).sum())(x)\n"
    assert "jax.xla-gpu-gather-gradient" in " ".join(f.message for f in lint.lint_source(grad, "t.py", _OPT_IN))


def test_catalog_keras3_dense_does_not_call_bias_add():
    """Keras 3 Dense adds its bias with ops.add (keras/src/layers/core/dense.py)."""
    src = (
        "import tensorflow as tf\nfrom tensorflow import keras\ntf.random.set_seed(0)\n"
        "m = keras.layers.Dense(3)\nmodel.fit(x, y)\n"
    )
    assert "FWD701" not in [f.code for f in lint.lint_source(src, "t.py")]


def test_jax_key_passed_through_double_star_kwargs_does_not_crash():
    """FWD602/FWD601 looked one level into a local callee and indexed its parameters with
    None for a ``**kwargs`` argument (TypeError, FWD004 on jax's own sources)."""
    from fwd9m.lint import lint_source

    src = (
        "import jax\ndef f(key, **kw):\n    return jax.random.normal(key)\n"
        "def main(opts):\n    key = jax.random.key(0)\n    f(key, **opts)\n    return f(key)\n"
    )
    assert not [x for x in lint_source(src, "t.py") if x.code == "FWD004"]


def test_catalog_torch_cpu_operand_needs_the_whole_chain_on_the_cpu():
    """Only a factory without device= makes a CPU tensor: a name, device= or .cuda() may be on the GPU."""
    for body in (
        "y = torch.cumsum(x, 0)\n",
        "y = torch.cumsum(torch.ones(3, device='cuda'), 0)\n",
        "y = torch.cumsum(torch.ones(3).cuda(), 0)\n",
    ):
        assert "FWD703" in [f.code for f in lint.lint_source(_TORCH_GPU + body, "train.py", _OPT_IN)], body


def test_checkpoint_fixture_in_a_test_file_is_not_a_training_checkpoint():
    """FWD501 in litgpt's and timm's tests: a checkpoint a test writes is a fixture."""
    src = (
        "import torch\ndef test_resume(tmp_path):\n"
        "    ckpt = {'model': m.state_dict(), 'optimizer': opt.state_dict()}\n"
        "    torch.save(ckpt, tmp_path / 'c.pt')\n"
        "    opt.load_state_dict(torch.load(tmp_path / 'c.pt')['optimizer'])\n"
    )
    on = Config(select=["FWD501"])
    assert not [f for f in lint.lint_source(src, "test_checkpoint.py", on) if f.code == "FWD501"]
    assert [f for f in lint.lint_source(src, "train.py", on) if f.code == "FWD501"]


def test_checkpoint_saved_through_a_local_module_helper(tmp_path):
    """DINO: ``utils.save_on_master(save_dict, path)``, where utils.py beside the script
    wraps torch.save: one level into the local module."""
    (tmp_path / "utils.py").write_text(
        "import torch\ndef save_on_master(*args, **kwargs):\n    torch.save(*args, **kwargs)\n"
    )
    (tmp_path / "main.py").write_text(
        "import torch\nimport utils\ndef train(model, optimizer):\n"
        "    d = {'student': model.state_dict(), 'optimizer': optimizer.state_dict()}\n"
        "    utils.save_on_master(d, 'checkpoint.pth')\n"
        "    utils.restart_from_checkpoint('checkpoint.pth', student=model, optimizer=optimizer)\n"
    )
    found = lint.lint_paths([tmp_path / "main.py"], Config(select=["FWD501"])).findings
    assert [(f.code, f.line) for f in found] == [("FWD501", 5)]


def test_catalog_cumsum_dtype_condition():
    """torch.cumsum alerts on CUDA only for floating/complex input (torch/__init__.py 2.13,
    line 1470): an integer dtype= rules it out, otherwise the finding says it could not."""
    flagged = [
        f for f in lint.lint_source(_TORCH_GPU + "y = torch.cumsum(x, 0)\n", "t.py", _OPT_IN) if f.code == "FWD703"
    ]
    assert flagged and "not ruled out" in flagged[0].message
    src = _TORCH_GPU + "y = torch.cumsum(x, 0, dtype=torch.int64)\n"
    assert "FWD703" not in [f.code for f in lint.lint_source(src, "t.py", _OPT_IN)]


def test_loader_built_in_a_local_data_module_counts_for_the_script(tmp_path):
    """Cross-file view (issue 15): train.py calls data.make_loader, which builds a
    DataLoader(shuffle=True) without generator=; train.py never seeds torch, so the
    finding is on its call. Seeding torch in train.py, or a generator= in data.py, clears it."""
    (tmp_path / "data.py").write_text(
        "import torch\ndef make_loader(ds):\n    return torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True)\n"
    )
    train = (
        "import torch\nfrom data import make_loader\nmodel = torch.nn.Linear(2, 1)\n"
        "for x, y in make_loader(ds):\n    model(x).sum().backward()\n"
    )
    (tmp_path / "train.py").write_text(train)
    only = Config(select=["FWD307"])
    found = lint.lint_paths([tmp_path / "train.py"], only).findings
    assert [(f.code, f.line) for f in found] == [("FWD307", 4)], found
    assert "data.make_loader" in found[0].message
    (tmp_path / "train.py").write_text(train.replace("model =", "torch.manual_seed(0)\nmodel ="))
    assert not lint.lint_paths([tmp_path / "train.py"], only).findings
    assert not lint.lint_paths([tmp_path / "data.py"], only).findings  # a library module: its caller seeds
    # built only on one branch (timm's create_loader with scheduled_batching): not counted
    (tmp_path / "data.py").write_text(
        "import torch\ndef make_loader(ds, sched=False):\n    sampler = None\n"
        "    if sched:\n        sampler = torch.utils.data.RandomSampler(ds)\n"
        "    return torch.utils.data.DataLoader(ds, sampler=sampler)\n"
    )
    (tmp_path / "train.py").write_text(train)
    assert not lint.lint_paths([tmp_path / "train.py"], only).findings
