"""What the figures and the pages say of any report: the caption and notes, read from
its typed header, and a serve-ab report's rates and arms, read from its dict (in the
current layout: ``report.migrate`` brought older ones to it). Nothing here raises on a
missing block: a figure of a partial report says "no data"."""

from __future__ import annotations

import math
from typing import Any

from kimi_bench.report.envelope import Git, Header
from kimi_bench.report.kinds import MicroReport
from kimi_bench.report.migrate import rate_label as _rate_label
from kimi_bench.report.roles import baseline_arm

Dict = dict[str, Any]


def number(v: Any) -> float | None:
    """A finite float, or None for null / NaN / non-numbers (a hostile report stays drawable)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


# --------------------------------------------------------------------- environment / caption
# These read the typed header (``report.envelope.Header``) every report has.


def commit(report: Header) -> str:
    git = report.environment.git or Git()
    return str(git.commit or "?")[:12] + ("+dirty" if git.dirty else "")


def device(report: Header) -> str:
    env = report.environment
    name, dev = env.device_name, env.device
    return f"{name} ({dev})" if name and dev and name != dev else str(name or dev or "?")


def preset(report: Header) -> str:
    return str(report.environment.preset or "?")


def ranks(report: Header) -> str:
    r = report.config.ranks
    return "?" if r is None else str(r)


def carrier(report: Header) -> str:
    return str(report.config.transport or "n/a")


def caption(report: Header) -> str:
    """One line naming what produced the numbers: device, preset, ranks, carrier, commit."""
    env = report.environment
    parts = [
        device(report),
        f"preset {preset(report)}",
        f"{ranks(report)} ranks",
        f"carrier {carrier(report)}",
        f"commit {commit(report)}",
    ]
    if env.torch:
        parts.append(f"torch {env.torch}")
    if env.created:
        parts.append(env.created)
    return " · ".join(parts)


def verdict(report: Header) -> str:
    return str(report.summary.verdict or "")


NOISE_PREFIX = "noisy: "


def reader_notes(report: Header) -> list[str]:
    """The notes as a page lists them: a micro report's per-stage noise warnings
    (``noisy: <arm>/<stage>: ...``) are left out, as its noise table (after the figures)
    shows them grouped per arm."""
    if isinstance(report, MicroReport) and report.arms:
        return [n for n in report.notes if not n.startswith(NOISE_PREFIX)]
    return list(report.notes)


# --------------------------------------------------------------------------------- serve


def serve_rates(report: Dict) -> list[str]:
    """Offered rates as category labels, in the run's order ("2", "8", "inf")."""
    return [_rate_label(r) for r in report.get("summary", {}).get("rates") or []]


def offered_rate(label: str) -> float | None:
    """req/s offered at a rate category; None for "inf" (all requests at once)."""
    try:
        v = float(label)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def serve_arms(report: Dict) -> list[str]:
    return [str(a) for a in report.get("config", {}).get("arms") or []]


def base_arm(report: Dict) -> str:
    """What a serve-ab report compares every arm with (``roles.baseline_arm``: the baseline
    arm among emulated arms, else the first: the first ``--endpoint``, the first imported
    file)."""
    arms = serve_arms(report)
    return baseline_arm(report.get("config", {}), arms) or ""
