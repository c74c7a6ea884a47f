"""The verdict of a report as lines a reader can trust, each with its tone, from the
report's data: the HTML page, ``report.md``, the terminal and ``kimi-bench run`` print
these lines, in these words and colours.

Rules (issue 28):

- one ratio per comparison: micro compares arms by the per-repeat paired ratio (base total
  / arm total, median over repeats) with its interval; the payload-cost ratio is a line of
  its own only with its own interval;
- a result whose interval spans "no change" leads with **no difference resolved**, whatever
  its median says; only an interval wholly on one side is "faster"/"slower";
- a tone per line: ``good`` (resolved better, bit-identical), ``bad`` (resolved worse:
  "slower", a TTFT increase, a mismatch, a failed request, an interrupted run),
  ``unresolved`` (no difference resolved) and ``info`` (a plain benchmark, a caveat). A
  report's box takes its worst line's tone; only an all-good report is green.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from kimi_bench.infra.stats.format import fmt_pct, fmt_speedup, fmt_speedup_range
from kimi_bench.report import access
from kimi_bench.report.kinds import Compared, Envelope, MicroReport, ParityReport, ServeReport
from kimi_bench.report.schema import parse_report
from kimi_bench.report.tables_micro import Stated, ends, micro_of, payload_blocks, speedup_blocks
from kimi_bench.report.tables_serve import Entry, Serve

Dict = dict[str, Any]
Tone = Literal["good", "bad", "unresolved", "info"]
RANK: dict[str, int] = {"good": 0, "info": 1, "unresolved": 2, "bad": 3}
UNRESOLVED = "no difference resolved"


@dataclass(frozen=True)
class Line:
    text: str
    tone: Tone


def worst(lines: list[Line]) -> Tone:
    """The tone of a report's box: its worst line's (``info`` when there is none)."""
    return max((ln.tone for ln in lines), key=lambda t: RANK[t], default="info")


def text(lines: list[Line]) -> str:
    """The lines as one verdict string (``summary.verdict`` of new reports)."""
    return "; ".join(ln.text for ln in lines)


# -------------------------------------------------------------------------------- micro


def _direction(c: Compared) -> int:
    """+1 resolved faster (the whole CI, or re-run interval, above 1), -1 resolved slower,
    0 not resolved."""
    lo, hi, kind = ends(c)
    if kind not in ("ci", "prediction") or lo is None or hi is None:
        return 0
    return 1 if lo > 1 else -1 if hi < 1 else 0


def _ratio_line(key: str, c: Compared, what: str = "") -> Line | None:
    """One comparison of ``<arm>_vs_<base>``; None without a ratio."""
    med = c.median
    if med is None or med <= 0:
        return None
    arm, _, base = key.partition("_vs_")
    (lo, hi, kind), n = ends(c), c.n_units or c.n
    reps = f", {n} repeats" if isinstance(n, int) and what == "" else ""
    if kind == "prediction" and lo is not None and hi is not None:
        launches = c.interval.n_units if c.interval else None
        spread = f"95% re-run interval {fmt_speedup_range(lo, hi)}, {launches} launches"
    elif kind == "ci" and lo is not None and hi is not None:
        spread = f"95% CI {fmt_speedup_range(lo, hi)}{reps}"
    elif kind == "range" and lo is not None and hi is not None:
        spread = f"range {fmt_speedup_range(lo, hi)}: too few repeats for a CI"
    else:
        spread = "no interval"
    direction = _direction(c)
    head = f"{what}: " if what else ""
    if direction == 0:
        return Line(
            f"{UNRESOLVED}{' in ' + what if what else ''}: {arm} vs {base} "
            f"{fmt_speedup(med)} at the median ({spread})",
            "unresolved",
        )
    tone: Tone = "good" if direction > 0 else "bad"
    return Line(f"{head}{arm} {fmt_speedup(med, base)} ({spread})", tone)


def micro_lines(typed: MicroReport, stated: Stated) -> list[Line]:
    s = typed.summary
    recorded = access.verdict(typed)
    if s.error or recorded.startswith(("INCOMPLETE", "MISMATCH")):
        return [Line(recorded or f"INCOMPLETE: {s.error}", "bad")]
    if s.bit_exact_all_repeats is False:
        return [Line(recorded or "MISMATCH: the owner's BF16 outputs differ between arms", "bad")]
    totals, payload = speedup_blocks(stated), payload_blocks(stated)
    lines = [ln for k, b in totals.items() if (ln := _ratio_line(k, b))]
    reps = s.repeats_completed
    if s.bit_exact_all_repeats:
        lines.append(Line(f"owner BF16 outputs identical in {reps} repeats", "good"))
    for key, block in payload.items():
        if ends(block)[2] == "none":
            continue  # a payload ratio without its own interval is no headline
        line = _ratio_line(key, block, "payload cost (arm minus control)")
        if line is None:
            continue
        total = totals.get(key) or Compared()
        if _direction(total) * _direction(block) < 0:
            line = Line(
                line.text + "; the total says the opposite: the arms' control planes, not "
                "their pixels, make that difference",
                line.tone,
            )
        lines.append(line)
    return lines or [Line(recorded or "no comparison", "info")]


# ----------------------------------------------------------------------------- serve-ab


def _pct_interval(c: Compared) -> str:
    lo, hi, kind = ends(c)
    if lo is None or hi is None:
        return c.verdict or "no interval"
    if kind == "ci":
        return f"95% CI {fmt_pct(lo)} .. {fmt_pct(hi)}"
    return f"range {fmt_pct(lo)} .. {fmt_pct(hi)}: {c.verdict or 'no CI'}"


def _resolved(c: Compared) -> int:
    """+1 resolved increase, -1 resolved decrease, 0 not resolved (percent deltas)."""
    lo, hi, kind = ends(c)
    if kind != "ci" or lo is None or hi is None or c.significant is False:
        return 0
    return 1 if lo > 0 else -1 if hi < 0 else 0


def _throughput(block: Compared) -> tuple[str, int]:
    """The throughput part of a line and its resolved direction (+1 higher)."""
    d = block.delta_pct
    if d is None:
        return "", 0
    direction = _resolved(block)
    if direction == 0:
        n = block.b_units
        reps = f"{n} repeat" + ("" if n == 1 else "s")
        why = f"{reps}: no interval" if ends(block)[2] != "ci" else UNRESOLVED
        return f"; throughput {fmt_pct(d)} ({why})", 0
    return f"; throughput {fmt_pct(d)} ({_pct_interval(block)})", direction


def _ab_line(e: Entry, against: str) -> Line | None:
    """One A/B comparison's line: its median TTFT and throughput blocks."""
    med, rate = e.compared("median_ttft"), e.rate
    d = med.delta_pct
    if d is None or med.b_units == 0:
        return None  # an arm with no completed request is named among the failures
    arm, _, base = e.name(against).partition(" vs ")
    thr, thr_dir = _throughput(e.compared("throughput"))
    direction = _resolved(med)
    if direction == 0:
        return Line(
            f"rate {rate}: {UNRESOLVED} in median TTFT: {arm} {fmt_pct(d)} vs {base} "
            f"({_pct_interval(med)}){thr}",
            "bad" if thr_dir < 0 else "unresolved",
        )
    word = "faster" if direction < 0 else "SLOWER"
    tone: Tone = "good" if direction < 0 and thr_dir >= 0 else "bad"
    return Line(
        f"rate {rate}: {arm} median TTFT {fmt_pct(d)} vs {base}, {word} "
        f"({_pct_interval(med)}){thr}",
        tone,
    )


def _failures(report: ServeReport) -> list[str]:
    """Per arm with a failed request: how many of how many and of which kinds (the
    summary's ``failures`` of an HTTP run), else the per-rate rows' counts."""
    s = report.summary
    out = []
    for arm, f in (s.failures or {}).items():
        if f is not None and f.failed:
            kinds, examples = f.kinds or {}, f.examples or {}
            what = "; ".join(f"{k} x{n}: {examples.get(k, '')}" for k, n in kinds.items())
            out.append(f"{arm}: {f.failed} of {f.requests} requests failed ({what})")
    if out or not (s.failed_requests is not None and s.failed_requests > 0):
        return out
    rows = [
        f"{r.arm} at rate {r.rate}: {r.failed} failed"
        for r in report.results
        if r.failed is not None and r.failed > 0
    ]
    return rows or [f"{s.failed_requests} request(s) failed"]


def serve_lines(s: Serve) -> list[Line]:
    typed = s.typed
    failed, recorded = _failures(typed), access.verdict(typed)
    lines = []
    if typed.summary.error:
        lines.append(Line(f"INCOMPLETE: {typed.summary.error}", "bad"))
    if failed:
        lines.append(Line("FAILED REQUESTS: " + "; ".join(failed), "bad"))
    lines += [line for e in s.entries if (line := _ab_line(e, s.base))]
    if not typed.ab:
        lines.append(Line(recorded or "no A/B (one arm)", "info"))
    external = typed.config.endpoints or typed.config.imported
    if typed.environment.device == "cpu" and not external:
        lines.append(Line("CPU run: these numbers do not predict GPU behaviour", "info"))
    return lines


# ------------------------------------------------------------------------ parity, others


def parity_lines(report: ParityReport) -> list[Line]:
    s = report.summary
    recorded = access.verdict(report)
    good = (
        bool(s.accepted)
        # None: the runtime has no FP32 features (vllm-0.33 normalises on the device)
        and s.all_bit_exact_fp32 is not False
        and s.all_bit_exact_bf16 is True
        and not s.differing
        and not (s.deferred_decode and s.deferred_decode.differing)
        and not (s.reference and s.reference.differing)
        and not recorded.startswith(("INCOMPLETE", "DIFFERS", "NO INPUTS"))
    )
    text = recorded or ("BIT-IDENTICAL" if good else "no verdict")
    return [Line(text, "good" if good else "bad")]


def lines(report: Dict, typed: Envelope | None = None) -> list[Line]:
    """The verdict lines of a report's JSON dict by kind (a kind without rules: its
    recorded verdict, as information); ``typed``: the report as its kind's model."""
    typed = parse_report(report) if typed is None else typed
    if isinstance(typed, ParityReport):
        return parity_lines(typed)
    if isinstance(typed, MicroReport):
        return micro_lines(typed, micro_of(report).stated)
    if isinstance(typed, ServeReport):
        return serve_lines(Serve(typed, report))
    return [Line(access.verdict(typed) or "no verdict", "info")]
