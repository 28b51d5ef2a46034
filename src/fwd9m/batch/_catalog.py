"""The batch-invariance entries of the catalog (``catalog/data/batch.toml``): for an op
that varies with the batch, what is known to fix it."""

from __future__ import annotations


def fixes_for(framework: str, op: str) -> list[dict]:
    """``{"id", "text", "code"}`` for every fix of every batch entry of ``framework``
    listing ``op`` (``aten::addmm.default`` matches ``aten::addmm``)."""
    from ..catalog._batch import batch_entries

    name = op.split(".")[0]
    out = []
    for e in batch_entries(framework):
        if name in e["ops"]:
            out += [{"id": e["id"], "text": f["text"], "code": f.get("code", "")} for f in e["fixes"]]
    return out
