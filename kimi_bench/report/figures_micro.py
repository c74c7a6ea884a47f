"""micro figures: where the time and the bytes go, stage by stage, per arm."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kimi_bench.infra.stats import Measurement
from kimi_bench.infra.stats.format import fmt_ms
from kimi_bench.report.figbase import (
    FigureSpec,
    arm_color,
    decorate,
    empty_figure,
    human_bytes,
    inches,
    plain_log_axis,
    pyplot,
    stage_colors,
)
from kimi_bench.report.kinds import PayloadCost
from kimi_bench.report.tables_micro import Micro
from kimi_bench.results.micro import MicroDerived


@dataclass(frozen=True)
class StageStat:
    arm: str
    stage: str
    spread: Measurement | None  # None: not measured
    bytes: int


def stage_stats(d: MicroDerived | None) -> list[StageStat]:
    """Per arm, per stage (in pipeline order): median/p10/p90 ms and bytes moved."""
    arms = d.arms.items() if d else []
    return [StageStat(arm, stage, m if m.n else None, int(f.stage_bytes[stage]))
            for arm, f in arms for stage, m in f.stages.items()]  # fmt: skip


def _stage_order(stats: list[StageStat]) -> list[str]:
    return list(dict.fromkeys(s.stage for s in stats))


def _stacked_totals(ax: Any, d: MicroDerived, stats: list[StageStat], colors: Any) -> None:
    """Panel 1: one stacked bar per arm (stage medians), the total's p10-p90 as a whisker,
    the floor as a dashed line."""
    arms = list(dict.fromkeys(s.arm for s in stats))
    for x, arm in enumerate(arms):
        bottom = 0.0
        for s in stats:
            if s.arm != arm or s.spread is None:
                continue
            ax.bar(x, s.spread.median, bottom=bottom, color=colors[s.stage], width=0.6)
            bottom += s.spread.median
        total = d.arms[arm].total
        if total.n:
            ax.errorbar(
                x,
                total.median,
                yerr=[[total.median - total.p10], [total.p90 - total.median]],
                color="black",
                capsize=6,
                lw=1.2,
            )
            ax.annotate(
                f"{fmt_ms(total.median, significant=True)}\np10 {total.p10:.3g}\n"
                f"p90 {total.p90:.3g}",
                (x, max(total.p90, bottom)),
                xytext=(0, 4),
                textcoords="offset points",
                ha="center",
                fontsize=7.5,
            )
    floor = d.floor_ms
    if floor is not None:
        ax.axhline(floor, color="crimson", ls="--", lw=1.2)
    names = [a.replace("-", "-\n", 1) if len(arms) > 3 and len(a) > 8 else a for a in arms]
    ax.set_xticks(range(len(arms)), names, fontsize=8.5)
    ax.set_xlim(-0.6, len(arms) - 0.4)
    ax.set_ylabel("ms per repeat (stage medians stacked)")
    ax.set_title("total: stacked stage medians, p10-p90 of the total", fontsize=9)
    ax.margins(y=0.18)
    ax.grid(axis="y", alpha=0.3)


def _per_stage(ax: Any, stats: list[StageStat], value: str) -> None:
    """Horizontal grouped bars per stage on a log axis: ``value`` "ms" (median with p10-p90
    whiskers) or "bytes". Stages that do not apply to an arm are marked n/a."""
    stages = _stage_order(stats)
    arms = list(dict.fromkeys(s.arm for s in stats))
    by = {(s.arm, s.stage): s for s in stats}
    h = 0.8 / max(len(arms), 1)
    if value == "ms":
        lows = [s.spread.p10 for s in stats if s.spread]
        highs = [s.spread.p90 for s in stats if s.spread]
    else:
        lows = highs = [float(s.bytes) for s in stats]
    base = min((v for v in lows if v > 0), default=1e-3) / 3
    top_limit = max((v for v in highs if v > 0), default=1.0) * 6
    for k, arm in enumerate(arms):
        for i, stage in enumerate(stages):
            s = by.get((arm, stage))
            y = i + (k - (len(arms) - 1) / 2) * h
            if s is None or (value == "ms" and s.spread is None):
                ax.text(base, y, " n/a", va="center", fontsize=7, color="grey")
                continue
            if value == "ms":
                assert s.spread is not None
                v = s.spread.median
                err = [[max(v - s.spread.p10, 0)], [max(s.spread.p90 - v, 0)]]
                label = fmt_ms(v, significant=True)
            else:
                v, err, label = float(s.bytes), None, human_bytes(s.bytes)
            if v <= 0:
                ax.text(base, y, f" {label}", va="center", fontsize=7, color="grey")
                continue
            ax.barh(
                y,
                v - base,
                left=base,
                height=h,
                color=arm_color(arm),
                xerr=err,
                error_kw={"capsize": 2, "lw": 0.8},
                label=arm if i == 0 else None,
            )
            top = v if err is None else v + err[1][0]
            ax.text(top * 1.08, y, label, va="center", fontsize=6.5)
    ax.set_xscale("log")
    ax.set_xlim(left=base, right=top_limit)
    if value == "bytes":
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.xaxis.set_major_locator(LogLocator(base=1024))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: human_bytes(v)))
        ax.xaxis.set_minor_formatter(NullFormatter())
    else:
        plain_log_axis(ax.xaxis)
    ax.set_yticks(range(len(stages)), stages, fontsize=8)
    ax.set_ylim(len(stages) - 0.5, -0.5)
    ax.grid(axis="x", alpha=0.3, which="both" if value == "ms" else "major")


def stages_figure(m: Micro) -> Any:
    d, report = m.derived, m.header
    stats = stage_stats(d)
    title = "stage medians and bytes moved"
    if d is None or not stats:
        return empty_figure(report, title, "the report has no stage timings")
    plt = pyplot()
    colors = stage_colors(_stage_order(stats))
    fig, axes = plt.subplots(1, 3, figsize=(16, 7.4), gridspec_kw={"width_ratios": [1.0, 1.5, 1.5]})
    _stacked_totals(axes[0], d, stats, colors)
    _per_stage(axes[1], stats, "ms")  # the floor bounds a total, not a stage: left panel only
    axes[1].set_xlabel("ms (log scale), median with p10-p90 whiskers")
    axes[1].set_title("each stage (log scale: sub-millisecond stages visible)", fontsize=9)
    _per_stage(axes[2], stats, "bytes")
    axes[2].set_xlabel("bytes moved per repeat (log scale)")
    axes[2].set_title("bytes moved per stage", fontsize=9)
    _stage_legends(fig, stats, colors, d.floor_ms)
    note = "floor: raw bytes pinned H2D + materialize on the owner (the least any path can take)"
    return decorate(fig, report, title, note)


def _stage_legends(fig: Any, stats: list[StageStat], colors: Any, floor: float | None) -> None:
    """Below the panels, in fixed inches: the arms' colours (middle and right panels) and
    the floor, then the stages' colours (left panel); the caption goes under both."""
    plt = pyplot()
    arms = list(dict.fromkeys(s.arm for s in stats))
    handles = [plt.Rectangle((0, 0), 1, 1, color=arm_color(a)) for a in arms]
    labels = [f"{a} (middle, right)" if i == 0 else a for i, a in enumerate(arms)]
    if floor is not None:
        handles.append(plt.Line2D([], [], color="crimson", ls="--", lw=1.2))
        labels.append(f"floor {fmt_ms(floor, significant=True)}")
    fig.tight_layout(rect=(0, inches(fig, 1.3), 1, 1 - inches(fig, 0.4)))
    fig.legend(handles, labels, fontsize=7.5, loc="lower center", ncol=len(labels),
               bbox_to_anchor=(0.5, inches(fig, 0.88)))  # fmt: skip
    fig.legend(
        [plt.Rectangle((0, 0), 1, 1, color=colors[s]) for s in colors],
        list(colors),
        fontsize=7,
        loc="lower center",
        bbox_to_anchor=(0.5, inches(fig, 0.3)),
        ncol=min(len(colors), 12),
        title="stages (left panel: stacked in this order, bottom up)",
        title_fontsize=7,
    )


@dataclass(frozen=True)
class Span:
    lane: str  # "producer", "rank 0", ...
    stage: str
    start_ms: float
    end_ms: float


def micro_timeline(report: Micro, arm: str) -> tuple[list[Span], bool]:
    """Spans of one repeat of ``arm`` and whether they are per rank: one lane per rank when
    the report has them (``timeline.<arm>.ranks``), else the stages of the median-total
    repeat laid end to end on one lane (``per_rank`` False)."""
    tl = (report.stated.timeline or {}).get(arm)
    if tl is not None and tl.ranks:
        spans = []
        for lane in tl.ranks:
            name = str(lane.lane or f"rank {lane.rank}")
            spans += [Span(name, str(s.stage), s.start_ms, s.end_ms) for s in lane.spans or []
                      if s.start_ms is not None and s.end_ms is not None]  # fmt: skip
        return spans, True
    reps = sorted(report.raw.repeats.get(arm) or [] if report.raw else [], key=lambda r: r.total_ms)
    if not reps:
        return [], False
    t, spans = 0.0, []
    for stage, ms in reps[len(reps) // 2].stage_ms.items():
        spans.append(Span("stages in sequence", stage, t, t + ms))
        t += ms
    return spans, False


def timeline_figure(m: Micro) -> Any:
    """Lanes of one repeat per arm. With per-rank spans in the report, one lane per rank
    and the critical-path rank (the last to finish) marked; otherwise the median repeat's
    stages laid end to end on one lane, and the caption says per-rank data is missing."""
    d, report = m.derived, m.header
    title = "timeline of one repeat"
    lanes = {arm: micro_timeline(m, arm) for arm in (d.arms if d else [])}
    lanes = {a: v for a, v in lanes.items() if v[0]}
    if not lanes:
        return empty_figure(report, title, "the report has no per-repeat stage times")
    plt = pyplot()
    seen = {s.stage for spans, _ in lanes.values() for s in spans}
    order = _stage_order(stage_stats(d))
    colors = stage_colors(order + sorted(seen - set(order)))
    stages = [s for s in colors if s in seen]
    n_lanes = sum(len({s.lane for s in spans}) for spans, _ in lanes.values())
    fig, axes = plt.subplots(
        len(lanes),
        1,
        figsize=(12, 2.2 + 0.45 * n_lanes + 0.9 * len(lanes)),
        squeeze=False,
        sharex=True,
    )
    for ax, (arm, (spans, pr)) in zip(axes[:, 0], lanes.items(), strict=True):
        names = list(dict.fromkeys(s.lane for s in spans))
        ends = {n: max(s.end_ms for s in spans if s.lane == n) for n in names}
        critical = max(ends, key=lambda n: ends[n])
        for y, name in enumerate(names):
            for s in (s for s in spans if s.lane == name):
                w = max(s.end_ms - s.start_ms, 1e-6)
                ax.barh(y, w, left=s.start_ms, color=colors[s.stage], height=0.6, ec="white")
        ax.set_yticks(range(len(names)), names, fontsize=8)
        if pr:
            ax.get_yticklabels()[names.index(critical)].set_color("crimson")
            ax.get_yticklabels()[names.index(critical)].set_fontweight("bold")
        ax.invert_yaxis()
        head = f"{arm}: ends at {fmt_ms(ends[critical], significant=True)}"
        if pr:
            head += f"; critical path: {critical}"
        ax.set_title(head, fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("ms since the repeat started")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[s]) for s in stages]
    rows = -(-len(stages) // 9)
    fig.tight_layout(rect=(0, inches(fig, 0.6 + 0.2 * rows), 1, 1 - inches(fig, 0.4)))
    fig.legend(handles, stages, fontsize=7, loc="lower center", ncol=9,
               bbox_to_anchor=(0.5, inches(fig, 0.35)))  # fmt: skip
    missing = [a for a, (_, pr) in lanes.items() if not pr]
    note = "one lane per rank; the critical path (last rank to finish) in red"
    if missing:
        note = (
            f"no per-rank timestamps for {', '.join(missing)} in this report: the median-total "
            "repeat's stages are drawn end to end on one lane"
        )
    return decorate(fig, report, title, note)


def payload_figure(m: Micro) -> Any:
    """Per arm: the total split into its control plane (emulation-only stages hatched) and
    its payload cost with the payload interval, against the control + data floor."""
    ctl, report = m.typed.control, m.header
    title = "control plane and payload cost"
    if ctl is None or not ctl.payload:
        return empty_figure(report, title, "the report has no control rounds")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 2.4 + 0.9 * len(ctl.payload)))
    only = [e.stage for e in ctl.emulation_only if e.kind == "emulation_only"]
    arms = list(ctl.payload)
    right = 0.0
    for y, arm in enumerate(arms):
        right = max(right, _payload_bar(ax, y, arm, ctl.payload[arm], only))
    floor = ctl.floor.floor_ms
    if floor:
        ax.axvline(floor, color="crimson", ls="--", lw=1.2,
                   label=f"control + data floor {fmt_ms(floor, significant=True)}")  # fmt: skip
    ax.set_yticks(range(len(arms)), arms)
    ax.set_ylim(len(arms) - 0.45, -0.85)  # room above each bar for its label
    ax.set_xlim(0, right * 1.08 or 1.0)
    ax.set_xlabel("ms per repeat: control median + payload cost (arm median minus control)")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout(rect=(0, inches(fig, 0.75), 1, 1 - inches(fig, 0.4)))
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7.5, loc="lower center", ncol=len(labels),
               bbox_to_anchor=(0.5, inches(fig, 0.33)))  # fmt: skip
    note = "payload interval: 95% bootstrap over repeats and control rounds (both sides)"
    return decorate(fig, report, title, note)


def _payload_bar(ax: Any, y: int, arm: str, p: PayloadCost, only: list[str]) -> float:
    """One arm's bar (control plane, its emulation-only part hatched, payload cost with
    its interval) and its label above the bar; returns the bar's right end (ms)."""
    emu = sum(p.stages[s].control_ms or 0.0 for s in only if s in p.stages)
    ctl_ms, pay, iv = p.total.control_ms or 0.0, p.total.payload_ms or 0.0, p.total.interval
    rest = ctl_ms - emu
    ax.barh(y, rest, color="0.7", height=0.55, label="control plane" if y == 0 else None)
    ax.barh(y, emu, left=rest, color="0.85", hatch="//", height=0.55,
            label="emulation-only (control)" if y == 0 and emu else None)  # fmt: skip
    start = rest + emu
    ax.barh(y, max(pay, 0.0), left=start, color=arm_color(arm), height=0.55)
    end = start + max(pay, 0.0)
    if iv.low is not None and iv.high is not None:
        err = [[max(pay - iv.low, 0)], [max(iv.high - pay, 0)]]
        ax.errorbar(start + pay, y, xerr=err, color="black", capsize=4, lw=1)
        end = max(end, start + iv.high)
    text = f"payload {fmt_ms(pay, significant=True)} (control {fmt_ms(ctl_ms, significant=True)})"
    if iv.low is None or iv.low <= 0:  # the bar cannot tell a cost from none
        text += "; not resolved above zero (the interval reaches 0)"
    box = {"facecolor": "white", "edgecolor": "none", "pad": 0.6, "alpha": 0.85}
    ax.text(0, y - 0.34, " " + text, fontsize=7.5, va="bottom", bbox=box)
    return end


FIGURES = (
    FigureSpec(
        "stages",
        "Stage medians and bytes moved",
        "Left: stage medians stacked per arm with the total's p10-p90 whisker and the floor "
        "(dashed). Middle: each stage on a log axis with p10-p90 whiskers. Right: bytes moved "
        "per stage.",
        stages_figure,
    ),
    FigureSpec(
        "timeline",
        "Timeline of one repeat",
        "Stages of one repeat on a time axis, one lane per rank when the report carries "
        "per-rank timestamps (critical-path rank in red).",
        timeline_figure,
    ),
    FigureSpec(
        "payload",
        "Control plane and payload cost",
        "Per arm: the control plane (the same pipeline with one merged token per image; "
        "emulation-only stages hatched) and the payload cost on top (arm minus its control, "
        "95% interval), against the control + data floor (dashed).",
        payload_figure,
    ),
)
