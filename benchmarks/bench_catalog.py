"""Catalog costs: loading every data file against reading the same bytes, and an op
look-up (what debug does per traced op) against a plain dict look-up."""

from __future__ import annotations

from _harness import Case


def cases(quick: bool):
    import sys
    from importlib import resources

    from fwd9m import catalog
    from fwd9m.catalog import _load, _query

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    files = [resources.files("fwd9m.catalog").joinpath("data", f"{fw}.toml") for fw in catalog.FRAMEWORKS]

    def parse_only():  # baseline: TOML parsing of the same files, no validation
        for f in files:
            tomllib.loads(f.read_text(encoding="utf-8"))

    def load_all():  # candidate: cold load + validation + Entry objects + indexes
        for fn in (_load._read, _load.load, _query._op_index, _query._symbol_index, _query._at, _query._for_op):
            fn.cache_clear()
        for fw in catalog.FRAMEWORKS:
            _load.load(fw)
        catalog.for_op("torch", "aten::index_put_")

    ops = [
        "aten.index_put_.default",
        "aten.add.Tensor",
        "aten.mm.default",
        "aten.scatter_add_.default",
        "aten.convolution.default",
    ] * (200 if quick else 2000)
    plain = {"index_put": 1, "scatter_add": 2}

    def dict_lookup():
        for op in ops:
            plain.get(op.split(".")[1].rstrip("_"))

    def catalog_lookup():
        for op in ops:
            catalog.for_op("torch", op)

    return [
        Case(
            "catalog: cold load of all data files",
            parse_only,
            load_all,
            baseline_name="tomllib.loads of the same files",
            target=3.0,
            repeat=3 if quick else 7,
            note="validation, Entry objects and indexes cost at most 3x the TOML parse",
        ),
        Case(
            "catalog.for_op per traced op",
            dict_lookup,
            catalog_lookup,
            baseline_name="dict.get on the op name",
            target=10.0,
            repeat=3 if quick else 7,
            note="indexed and memoised look-up",
        ),
    ]
