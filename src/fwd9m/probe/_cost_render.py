"""The text table of ``fwd9m probe --cost`` (:class:`fwd9m.probe._cost.CostReport`)."""

from __future__ import annotations

import statistics

_HOW = {
    True: "switch toggled in one process, off and on alternately",
    False: "two fresh processes, off then on (the switch cannot be turned off in-process); samples paired "
    "in order, so a ratio also holds what differs between two processes",
}


def _ms(seconds: list[float]) -> str:
    return f"{statistics.median(seconds) * 1e3:10.3f}"


def _first_sentence(text: str | None, limit: int = 160) -> str:
    """An error's first sentence, as the table's cell (the JSON keeps it whole)."""
    first = (text or "").split(". ", 1)[0]
    return first if len(first) <= limit else first[: limit - 3] + "..."


def _elsewhere(r) -> bool:
    """The catalog entry names devices and this row's is not one (catalog: cpu, gpu, tpu)."""
    kind = "gpu" if r.device.startswith("cuda") else r.device
    return bool(r.entry_devices) and kind not in r.entry_devices


def _line(r, width: int) -> str:
    label = (r.key + ("*" if _elsewhere(r) else "")).ljust(width)
    where = f"{r.framework:<10} {r.device:<7} {r.threads:>2}t"
    if r.status == "raises":
        return f"  {where} {label} raises under the switch: {_first_sentence(r.error)}"
    if r.status != "timed":
        return f"  {where} {label} not timed: {_first_sentence(r.error)}"
    ratios = r.ratios
    spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
    added = r.added()
    extra = f"  {r.count:>6} {added * 1e3:+10.3f}" if added is not None else ""
    return f"  {where} {label} {_ms(r.off)} {_ms(r.on)} {statistics.median(ratios):7.2f}x  {spread:<11}{extra}"


def render(report) -> str:
    rows = report.rows
    s = report.settings
    lines = [
        f"COST OF THE DETERMINISM SWITCH, op by op: time per call with the switch on / off "
        f"(median of {s['pairs']} pair(s), spread min-max; below 1x: faster with the switch on)"
    ]
    if s.get("inputs"):
        lines.append("  inputs at the given shapes: " + ", ".join(f"{k}={v}" for k, v in s["inputs"].items()))
    for fw in dict.fromkeys(r.framework for r in rows):
        in_process = next(r.in_process for r in rows if r.framework == fw)
        lines.append(f"  {fw}: {_HOW[in_process]}")
    if rows:
        width = max(24, *(len(r.key) + 1 for r in rows))
        trace = " calls  added (ms)" if s.get("trace") else ""
        head = f"  {'framework':<10} {'device':<7} {'thr':>3} {'op'.ljust(width)} {'off (ms)':>10} {'on (ms)':>10} "
        lines.append(head + f"{'ratio':>8}  {'spread':<11}{trace}")
        lines += [_line(r, width) for r in rows]
    else:
        lines.append("  nothing to time (no op entry with a probe for these frameworks)")
    if any(_elsewhere(r) for r in rows):
        lines.append("  *: the catalog entry is about another device; here the switch may leave the kernel as it is")
    if s.get("trace"):
        lines.append(
            "  added: the trace's calls of the op kind x (median on - median off): "
            "what the switch adds to one run of the trace"
        )
    if report.skipped:
        lines.append(f"Not timed ({len(report.skipped)}): " + ", ".join(sorted(report.skipped)[:12]))
    return "\n".join(line.rstrip() for line in lines)
