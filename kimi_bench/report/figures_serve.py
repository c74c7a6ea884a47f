"""serve-ab figures: TTFT and throughput against the offered rate (rates are categories),
TTFT distributions per rate, and where a request's time goes. Each figure draws from one
``ServeFigures``: what the figures read of a report, read and derived once per drawing."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kimi_bench.infra.stats.format import fmt_ms
from kimi_bench.report import access
from kimi_bench.report.envelope import Header
from kimi_bench.report.figbase import (
    FigureSpec,
    arm_color,
    decorate,
    empty_figure,
    inches,
    plain_log_axis,
    pyplot,
    stage_colors,
)
from kimi_bench.results.serve import ServeDerived, ServeRaw, derive_serve
from kimi_bench.results.serve_rows import RateRow, pct_name, readable_requests

_STATS = (("median", 50, "o"), ("p90", 90, "s"))


@dataclass(frozen=True)
class ServeFigures:
    """What the serve-ab figures read of a report: the header, the rates and arms in the
    run's order, the base arm, the figures of its request rows (derived once) and the
    achieved rate (``req_per_s``) of each (arm, rate) that ran. A row that does not read is
    left out, so a hostile report still draws what it can."""

    header: Header
    rates: list[str]
    arms: list[str]
    base: str
    derived: ServeDerived
    achieved: dict[tuple[str, str], float]

    @classmethod
    def of(cls, report: dict[str, Any]) -> ServeFigures:
        arms = access.serve_arms(report)
        rows = readable_requests(report.get("requests"))
        stated: dict[tuple[str, str], float | None] = {}
        for rec in report.get("results") or []:
            try:
                row = RateRow.model_validate(rec)
            except ValidationError:
                continue
            stated.setdefault((row.arm, row.rate), row.req_per_s)  # the first row of each
        achieved = {k: v for k, v in stated.items() if v is not None and math.isfinite(v)}
        derived = derive_serve(ServeRaw(tuple(rows), {}, tuple(arms)))
        header, rates = Header.model_validate(report), access.serve_rates(report)
        return cls(header, rates, arms, access.base_arm(report), derived, achieved)

    def ttfts(self, arm: str, rate: str) -> list[float]:
        return self.derived.cell(rate, arm).samples("ttft")

    def color(self, arm: str) -> str:
        return arm_color(arm, self.arms.index(arm) if arm in self.arms else None)


def _offsets(n: int, width: float = 0.5) -> list[float]:
    return [0.0] if n <= 1 else [-width / 2 + width * k / (n - 1) for k in range(n)]


def ttft_vs_rate_figure(s: ServeFigures) -> Any:
    rates, arms, d = s.rates, s.arms, s.derived
    title = "TTFT vs offered rate"
    if not rates or not any(s.ttfts(a, r) for a in arms for r in rates):
        return empty_figure(s.header, title, "the report has no completed requests")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 6.0))
    slots = _offsets(len(arms) * len(_STATS), 0.6)
    k = 0
    for arm in arms:
        for stat, q, marker in _STATS:
            xs, ys, lo, hi = [], [], [], []
            for i, rate in enumerate(rates):
                cell = d.cell(rate, arm)
                v = cell.stat("ttft", pct_name(q))
                if v is None:
                    continue
                ci = cell.interval("ttft", q) or (v, v)
                xs.append(i + slots[k])
                ys.append(v)
                lo.append(max(v - ci[0], 0.0))
                hi.append(max(ci[1] - v, 0.0))
            ax.errorbar(
                xs,
                ys,
                yerr=[lo, hi],
                fmt=marker,
                ms=7,
                mfc=s.color(arm) if stat == "median" else "white",
                color=s.color(arm),
                capsize=4,
                elinewidth=6,
                alpha=0.9,
                ls="none",
                label=f"{arm} {stat}",
            )
            for x, y in zip(xs, ys, strict=True):
                ax.annotate(
                    _short(y),
                    (x, y),
                    xytext=(5, 0),
                    textcoords="offset points",
                    fontsize=7,
                    va="center",
                )
            k += 1
    ax.set_xticks(range(len(rates)), [_rate_name(r) for r in rates])
    ax.set_xlim(-0.6, len(rates) - 0.4)
    ax.set_yscale("log")
    ax.margins(y=0.08)
    plain_log_axis(ax.yaxis)
    ax.set_xlabel("offered request rate (req/s; categories, not a numeric axis)")
    ax.set_ylabel("TTFT (ms, log scale)")
    ax.grid(axis="y", alpha=0.3, which="both")
    _legend_below(fig, ax.get_legend_handles_labels(), 2 * len(arms) if len(arms) < 4 else 4)
    return decorate(
        fig, s.header, title, "bars: 95% bootstrap interval over requests (2000 resamples)"
    )


def _legend_below(fig: Any, handles_labels: tuple[list[Any], list[str]], ncol: int) -> None:
    """The figure's legend under its axes, above the caption (fixed inches), so that it
    never covers a point; the axes are laid out above it."""
    handles, labels = handles_labels
    rows = -(-len(labels) // max(ncol, 1)) if labels else 0
    fig.tight_layout(rect=(0, inches(fig, 0.55 + 0.2 * rows), 1, 1 - inches(fig, 0.4)))
    if labels:
        fig.legend(handles, labels, fontsize=7.5, loc="lower center", ncol=ncol,
                   bbox_to_anchor=(0.5, inches(fig, 0.35)))  # fmt: skip


def _short(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def _rate_name(rate: str) -> str:
    return "inf (all at once)" if access.offered_rate(rate) is None else f"{rate} req/s"


def throughput_figure(s: ServeFigures) -> Any:
    rates, arms = s.rates, s.arms
    title = "achieved vs offered throughput"
    ran = {(a, r): v for (a, r), v in s.achieved.items() if a in arms and r in rates}
    rates = [r for r in rates if any((a, r) in ran for a in arms)]  # a rate that never ran: none
    if not ran:
        return empty_figure(s.header, title, "the report has no throughput per rate")
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 5.4))
    w = 0.8 / max(len(arms), 1)
    for i, rate in enumerate(rates):
        offered = access.offered_rate(rate)
        if offered is not None:
            ax.hlines(
                offered,
                i - 0.45,
                i + 0.45,
                color="black",
                ls="--",
                lw=1.2,
                label="offered" if i == 0 else None,
            )
    for k, arm in enumerate(arms):
        drawn = [(i, r) for i, r in enumerate(rates) if (arm, r) in ran]  # runs that ran
        xs = [i + (k - (len(arms) - 1) / 2) * w for i, _ in drawn]
        ys = [ran[(arm, r)] for _, r in drawn]
        ax.bar(xs, ys, width=w * 0.95, color=s.color(arm), label=f"{arm} achieved")
        for x, y, rate in zip(xs, ys, [r for _, r in drawn], strict=True):
            offered = access.offered_rate(rate)
            text = f"{y:.3g}" + (f"\n({y / offered:.0%})" if offered else "")
            ax.annotate(
                text,
                (x, max(y, offered or 0.0)),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=7,
            )
    ax.set_xticks(range(len(rates)), [_rate_name(r) for r in rates])
    ax.margins(y=0.12)
    ax.set_ylabel("completed requests per second")
    ax.set_xlabel("offered request rate (categories)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    return decorate(
        fig,
        s.header,
        title,
        "achieved = completed / (last first token - trace start); (%) = achieved / offered",
    )


def ttft_cdf_figure(s: ServeFigures) -> Any:
    rates, arms = s.rates, s.arms
    title = "TTFT distribution per rate"
    if not any(s.ttfts(a, r) for a in arms for r in rates):
        return empty_figure(s.header, title, "the report has no completed requests")
    plt = pyplot()
    width = max(4.6 * len(rates) + 1, 8.0)
    fig, axes = plt.subplots(1, len(rates), figsize=(width, 5.2), squeeze=False)
    for ax, rate in zip(axes[0], rates, strict=True):
        counts: list[str] = []
        for arm in arms:
            xs = sorted(s.ttfts(arm, rate))
            if not xs:
                continue
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.step(
                xs,
                ys,
                where="post",
                color=s.color(arm),
                lw=1.6,
                ls="--" if arm == s.base else "-",
                label=arm,
            )
            counts.append(f"{arm} {len(xs)}")
        ax.axhline(0.5, color="grey", lw=0.6)
        ax.axhline(0.9, color="grey", lw=0.6, ls=":")
        ax.set_xscale("log")
        plain_log_axis(ax.xaxis)
        ax.tick_params(axis="x", which="both", labelsize=7.5)
        ax.set_title(f"rate {_rate_name(rate)}\nrequests: {', '.join(counts)}", fontsize=8.5)
        ax.set_xlabel("TTFT (ms, log scale)")
        ax.grid(alpha=0.3, which="both")
    axes[0][0].set_ylabel("fraction of requests")
    labels: dict[str, Any] = {}  # one entry per arm: n per rate is in the panel's title
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            labels.setdefault(lab.split(" (n=")[0], h)
    _legend_below(fig, (list(labels.values()), list(labels)), len(labels))
    return decorate(fig, s.header, title, "grey lines: median (solid) and p90 (dotted)")


def waterfall_figure(s: ServeFigures) -> Any:
    rates, arms, d = s.rates, s.arms, s.derived
    title = "per-request stage waterfall (median stage times)"
    stages = list(d.stages)
    if (
        not stages
        or not rates
        or not any(d.cell(r, a).stage_medians(stages) for a in arms for r in rates)
    ):
        why = "the report has no per-request stage times (external servers report none)"
        return empty_figure(s.header, title, why)
    plt = pyplot()
    colors = stage_colors(stages)
    fig, axes = plt.subplots(
        len(rates), 1, figsize=(11, 2.0 + 1.1 * len(rates) * len(arms)), squeeze=False
    )
    for ax, rate in zip(axes[:, 0], rates, strict=True):
        for y, arm in enumerate(arms):
            med = d.cell(rate, arm).stage_medians(stages)
            t = 0.0
            for st in stages:
                v = med.get(st)
                if v is None:
                    continue
                ax.barh(
                    y,
                    v,
                    left=t,
                    color=colors[st],
                    height=0.55,
                    ec="white",
                    label=st.removesuffix("_ms") if y == 0 else None,
                )
                t += v
            m = d.cell(rate, arm).median("ttft")
            if m is not None:
                ax.plot([m, m], [y - 0.35, y + 0.35], color="black", lw=1.5)
                ax.annotate(
                    f"median TTFT {fmt_ms(m, significant=True)}",
                    (max(m, t), y),
                    xytext=(6, 0),
                    textcoords="offset points",
                    va="center",
                    fontsize=7,
                )
        ax.set_yticks(range(len(arms)), arms, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(f"rate {_rate_name(rate)}", fontsize=9, loc="left")
        ax.margins(x=0.22)
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("ms since the request was sent (stage medians laid end to end)")
    labels: dict[str, Any] = {}  # the stages of every panel (the first may have none)
    for ax in axes[:, 0]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            labels.setdefault(lab, h)
    _legend_below(fig, (list(labels.values()), list(labels)), len(labels))
    note = "black tick: median TTFT (medians of stages need not add up to the median TTFT)"
    return decorate(fig, s.header, title, note)


FIGURES: tuple[FigureSpec[ServeFigures], ...] = (
    FigureSpec(
        "ttft_vs_rate",
        "TTFT vs offered rate",
        "Median (filled) and p90 (hollow) TTFT per arm at each offered rate, with 95% "
        "bootstrap intervals; rates are categories.",
        ttft_vs_rate_figure,
    ),
    FigureSpec(
        "throughput",
        "Achieved vs offered throughput",
        "Completed requests per second per arm; dashed line: the offered rate.",
        throughput_figure,
    ),
    FigureSpec(
        "ttft_cdf",
        "TTFT distribution per rate",
        "Empirical CDF of TTFT per arm, one panel per offered rate.",
        ttft_cdf_figure,
    ),
    FigureSpec(
        "stage_waterfall",
        "Per-request stage waterfall",
        "Median time per pipeline stage of a request, laid end to end, per arm and rate.",
        waterfall_figure,
    ),
)
