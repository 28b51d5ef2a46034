"""The divergence that matters: each differing value followed forward through the
recorded data flow.

Two traces hold, for each op, the digests of its inputs and outputs; an input whose
digest is an earlier op's output is that value. From the first divergence on, every
value that differs between the runs is *tainted* by the divergence it comes from (its
digest in run A and in run B). A later op whose differing inputs are all tainted carries
the taint on to its differing outputs; a differing input that no earlier divergence
made, or an op whose outputs differ from identical inputs (a random draw, a
nondeterministic kernel), is a new divergence, a new source.

A source *reaches the results* when what it tainted is used by the optimizer's update,
is still used in a later step, or is used by the last ops of the trace. One that does
not is **harmless**: no later op reads its values (an initial weight that
``load_state_dict`` overwrites with ``copy_``, a draw never used), or what reads them
goes no further (a value read into Python, ``.item()``, and only printed). The report
names the first source that reaches the results first, and the harmless ones before it
after it. Values that go into a variable (TensorFlow's ``AssignVariableOp``) are state:
a later variable read that differs from identical inputs comes from them.

Digests are matched, not tensor identities: a value recomputed bit for bit by another
path is the same value, which is what a data-flow over values means.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Flow", "Source"]

#: sources followed at most (a bit each in a taint mask); later ones are not followed
MAX_SOURCES = 64
#: tainted digests remembered at most per run (then the oldest half is forgotten)
MAX_TAINTED = 1 << 18
#: a source read by one of the last this many ops of the trace reaches the results
LAST_OPS = 1
#: ops that write a value over their destination without reading it (its old value dies)
OVERWRITES = frozenset(
    {"aten::copy_", "aten::fill_", "aten::zero_", "AssignVariableOp", "Assign", "ResourceScatterUpdate"}
)
#: ops that read a tensor into Python (what they read leaves the recorded ops)
TO_PYTHON = frozenset({"aten::_local_scalar_dense", "aten::item", "aten::tolist"})


@dataclass
class Source:
    """One divergence entering the data flow, and how far its values go."""

    divergence: Any  #: the classified :class:`~fwd9m.debug._compare.Divergence`
    metas: set = field(default_factory=set)  #: dtype[shape] of its differing values
    reached: str = ""  #: how it reaches the results ("" when it does not)
    reads: int = 0  #: later ops that read one of its values
    last: Any = None  #: the last op that read one (an :class:`~fwd9m._recording._store.Op`)
    overwritten: Any = None  #: an op that wrote over a value like its own before any read
    to_python: Any = None  #: an op that read one of its values into Python
    to_state: Any = None  #: an op that put one of its values into a variable


def _ref(op: Any) -> dict[str, Any]:
    return {"seq": op.seq, "op": op.name, "location": op.location, "module": op.module, "phase": op.phase}


class Flow:
    """The taint of each source over both runs' digests (see the module doc)."""

    def __init__(self) -> None:
        self.sources: list[Source] = []
        self._taint: tuple[dict[int, int], dict[int, int]] = ({}, {})
        self._state = 0  #: sources whose values went into a variable
        #: sources whose values an in-place op wrote into memory (``buf[i] = x``: ``copy_``
        #: into a view); a later read of the whole memory is a value no op returned
        self._written = 0
        #: sources whose values were read into Python (``.item()``): Python may pass them
        #: on as a number no op digests (``x * f``)
        self._python = 0

    def add(self, divergence: Any, opa: Any, opb: Any, ins: list[int], outs: list[int]) -> int:
        """A new source at ``opa``/``opb``; returns its bit (0 when no more are followed)."""
        if len(self.sources) >= MAX_SOURCES:
            return 0
        src = Source(divergence)
        src.metas = {opa.outputs[i].meta for i in outs} | {opa.inputs[i].meta for i in ins}
        self.sources.append(src)
        bit = 1 << (len(self.sources) - 1)
        self._mark(opa, opb, outs, bit)
        self._mark(opa, opb, ins, bit, "inputs")  # the value that entered, wherever else it is used
        return bit

    def _mark(self, opa: Any, opb: Any, idx: list[int], mask: int, side: str = "outputs") -> None:
        for taint, op in zip(self._taint, (opa, opb)):
            if len(taint) > MAX_TAINTED:
                for k in list(taint)[: len(taint) // 2]:
                    del taint[k]
            tensors = getattr(op, side)
            for i in idx:
                d = tensors[i].digest
                taint[d] = taint.get(d, 0) | mask

    def untainted(self, opa: Any, opb: Any, ins: list[int]) -> tuple[int, list[int]]:
        """(the taint mask of the differing inputs ``ins``, those of them no source made).
        After an in-place write of a source's values into a view, a differing input that
        no op returned is taken to be the memory written (its base): theirs."""
        mask, new = 0, []
        ta, tb = self._taint
        for i in ins:
            m = ta.get(opa.inputs[i].digest, 0) | tb.get(opb.inputs[i].digest, 0)
            if m:
                mask |= m
            else:
                new.append(i)
        if new and self._written and all(not opa.inputs[i].meta.startswith("args") for i in new):
            return mask | self._written, []
        if new and self._python and all(opa.inputs[i].meta.startswith("args") for i in new):
            return mask | self._python, []  # a number Python took from a source's values (.item())
        return mask, new

    def state_read(self, opa: Any) -> int:
        """The sources a variable read may come from (values put into variables before)."""
        if self._state and any(t.meta.startswith(("resource", "variant")) for t in opa.inputs):
            return self._state
        return 0

    def python_read(self, opa: Any) -> int:
        """The sources an op with identical tensor inputs and differing outputs may come
        from: those read into Python before (``f = t.item(); x * f``), which Python may
        have passed to it as a number; none for an op without tensor inputs (a draw)."""
        return self._python if opa.inputs else 0

    def carry(self, opa: Any, opb: Any, outs: list[int], mask: int) -> None:
        """Op ``opa`` read values of the sources in ``mask``: mark its differing outputs,
        and note how far each source got."""
        self._mark(opa, opb, outs, mask)
        for k, src in enumerate(self.sources):
            if not mask >> k & 1:
                continue
            src.reads += 1
            src.last = opa
            d = src.divergence
            if not src.reached:
                if opa.phase == "optimizer":
                    src.reached = f"the optimizer's update at op #{opa.seq}"
                elif opa.step > d.step:
                    src.reached = f"step {opa.step} (op #{opa.seq})"
            if opa.name.startswith("aten::") and opa.name.endswith("_"):  # written in place
                self._written |= 1 << k
            if not outs and opa.name in TO_PYTHON and src.to_python is None:
                src.to_python = opa
                self._python |= 1 << k
            elif not outs and any(t.meta.startswith("resource") for t in opa.inputs):
                src.to_state = src.to_state or opa
                self._state |= 1 << k

    def agreeing(self, opa: Any) -> None:
        """An op whose values agree: one that writes over its destination ends the life
        of a value of the same shape that no op read yet (``load_state_dict``'s ``copy_``)."""
        if opa.name not in OVERWRITES:
            return
        metas = {t.meta for t in (*opa.outputs, *opa.inputs)}
        for src in self.sources:
            if (src.reads == 0 or src.to_state is not None) and src.overwritten is None and src.metas & metas:
                src.overwritten = opa

    def consequential(self, ops: int) -> tuple[int, list[dict[str, Any]]]:
        """(index of the first source that reaches the results, the harmless sources
        before it, each as a dict for the report), in a comparison of ``ops`` ops: a
        source also reaches them when one of the last :data:`LAST_OPS` ops (or 1% of
        them) reads its values. Index 0 and no harmless ones when none reaches them:
        then no source is shown to matter more than the first."""
        tail = ops - max(LAST_OPS, ops // 100)
        for k, src in enumerate(self.sources):
            last = src.last.seq if src.last is not None else src.divergence.seq
            if not src.reached and last >= tail:
                src.reached = f"the end of the run (op #{last})"
            if src.reached:
                return k, [harmless(s) for s in self.sources[:k]]
        return 0, []


def harmless(src: Source) -> dict[str, Any]:
    """A harmless source for the report: where it is, and why it does not matter."""
    d = src.divergence
    if src.overwritten is not None and src.reads == 0:
        o = src.overwritten
        why = f"overwritten at op #{o.seq} ({o.name} at {o.location or '?'}) before any op read it"
    elif src.reads == 0:
        why = "no later recorded op reads it (a value never used)"
    elif src.to_python is not None:
        o = src.to_python
        why = (
            f"read into Python at op #{o.seq} ({o.name} at {o.location or '?'}) and used by no later "
            f"recorded op (a value printed or logged; it matters only where Python passes it on)"
        )
    elif src.to_state is not None and src.overwritten is not None:
        o = src.overwritten
        why = (
            f"stored in a variable at op #{src.to_state.seq}, overwritten at op #{o.seq} "
            f"({o.name} at {o.location or '?'})"
        )
    else:
        o = src.last
        why = (
            f"last used at op #{o.seq} ({o.name} at {o.location or '?'}); what it computes "
            f"reaches neither the optimizer nor a later step nor the end of the run"
        )
    return {
        "kind": d.kind,
        "source": d.source,
        "seq": d.seq,
        "step": d.step,
        "op": d.op,
        "module": d.module,
        "phase": d.phase,
        "location": d.location,
        "why": why,
        "overwritten": _ref(src.overwritten) if src.overwritten is not None else None,
        "to_python": src.to_python is not None and src.reads == 1,
    }
