"""Are two runs comparable? What differs between them (device, runtime profile, decoder,
image spec, ranks, carrier, arms, the eager arm's scheduler, host load), and which
differences make a comparison meaningless (``hard``: another device, device model or
setup) rather than worth a note (``soft``: a busy host on one side).

``allow`` names hard differences the caller accepts (``gate
--allow-eager-baseline-mismatch``): they are kept, named, but soft."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from kimi_bench.report.envelope import Environment, Load, RunConfig
from kimi_bench.report.migrate import rate_label
from kimi_bench.report.model import Report, ReportError

# config keys that define the setup of each kind: a difference in any is "hard"
SETUP_KEYS: dict[str, tuple[str, ...]] = {
    "micro": (
        "groups",
        "images",
        "ranks",
        "transport",
        "runtime",
        "preset",
        "content",
        "repeat_share",
        "preprocess_cache",
    ),
    "serve-ab": (
        "rates",
        "ranks",
        "resolution",
        "images_per_request",
        "transport",
        "runtime",
        "preset",
        "image_format",
        "image_sizes",
        "image_count_mix",
        "image_content",
        "requests_file",
        "repeat_share",
        "preprocess_cache",
        "capacity",
    ),
    "parity": ("preset", "images", "ranks", "batch_size", "images_per_request"),
}


# the rate label of an imported run whose file does not record its rate or concurrency
# limit (``peers.load.Load.label``)
UNRECORDED = "unrecorded"

# the eager arm's scheduler (--eager-baseline); reports from before the option: pre-change
EAGER_BASELINE = "eager baseline (--eager-baseline)"


@dataclass(frozen=True)
class Difference:
    what: str
    a: Any
    b: Any
    hard: bool

    def __str__(self) -> str:
        return f"{self.what} {self.a!r} vs {self.b!r}"


def _labels(cfg: RunConfig) -> list[str]:
    """A serve-ab run's rate labels (``config.rate_labels``, else derived from the rates)."""
    if cfg.rate_labels:
        return [str(x) for x in cfg.rate_labels]
    return [rate_label(r) for r in cfg.rates or []]


# a setup key a report from before it existed lacks, read as the value it then had
_BEFORE: dict[tuple[str, str], Any] = {
    ("micro", "repeat_share"): 0.0,
    ("serve-ab", "capacity"): False,
    ("serve-ab", "image_content"): "random",
}


def _setup_value(report: Report, key: str) -> Any:
    value = report.config.get(key)
    return _BEFORE.get((report.kind, key), value) if value is None else value


def decoder_used(report: Report) -> str:
    """The decoder a run actually used: ``config.decoding`` (micro, serve-ab) or each parity
    row's ``decoder``; reports from before decoders were chosen all decoded with PIL."""
    if report.kind == "parity":
        rows = {str(r["decoder"]) for r in report.results if r.get("decoder")}
        return ",".join(sorted(rows)) or "pil"
    cfg = report.header.config
    if cfg.decoding and cfg.decoding.decoder:
        return cfg.decoding.decoder
    named = cfg.decoder
    return named if named and named != "auto" else "pil"


def load_meaning(load: Load | None) -> str | None:
    """A serve-ab run's offered load (``config.load``) as what it means, in words: the
    label, and the burstiness only at a paced rate (at an unlimited rate there are no
    gaps between arrivals for it to shape). A field the run did not record says so."""
    if load is None:
        return None
    missing = {str(x) for x in load.not_recorded}
    label = str(load.label)
    if label == UNRECORDED or {"request_rate", "max_concurrency"} & missing:
        return "not recorded"
    if load.unlimited_rate or load.request_rate is None:
        return label
    burst = load.burstiness
    shown = "not recorded" if "burstiness" in missing or burst is None else f"{burst:g}"
    return f"{label}, burstiness {shown}"


def _busy(env: Environment) -> bool:
    return bool(env.host_load and env.host_load.warning)


def _environment(report: Report) -> Environment:
    """The report's environment block, validated alone (validating the whole report for
    it cost seconds per pair on a folder of baselines)."""
    try:
        return Environment.model_validate(report.environment)
    except ValidationError as exc:
        label = report.source or f"{report.kind} report"
        raise ReportError(f"{label}: environment: {exc}") from None


def eager_baseline(report: Report) -> str:
    """The eager arm's scheduler a micro or serve-ab run used (``config.eager_baseline``;
    reports from before the option ran the pre-change one)."""
    return report.header.config.eager_baseline or "pre-change"


def differences(a: Report, b: Report, allow: frozenset[str] = frozenset()) -> list[Difference]:
    """What differs between two reports of one kind, hard differences first; those named
    in ``allow`` are soft."""
    out: list[Difference] = []
    ea, eb = _environment(a), _environment(b)
    if ea.device != eb.device:
        out.append(Difference("device", ea.device, eb.device, True))
    elif ea.device_name != eb.device_name:
        out.append(Difference("device name", ea.device_name, eb.device_name, True))
    for key in SETUP_KEYS.get(a.kind, ()):
        va, vb = _setup_value(a, key), _setup_value(b, key)
        if va != vb:
            out.append(Difference(key, va, vb, True))
    da, db = decoder_used(a), decoder_used(b)
    if da != db:  # another decoder decodes other pixels in another time (SPEC section 11)
        out.append(Difference("decoder", da, db, True))
    if a.kind in ("micro", "serve-ab") and eager_baseline(a) != eager_baseline(b):
        # another eager arm: every eager-relative figure (speedup, deltas) means another thing
        hard = EAGER_BASELINE not in allow
        out.append(Difference(EAGER_BASELINE, eager_baseline(a), eager_baseline(b), hard))
    if a.kind == "serve-ab":  # the offered load: rates as labelled, concurrency limits, bursts
        ca, cb = a.header.config, b.header.config
        la, lb = _labels(ca), _labels(cb)
        if la != lb:
            out.append(Difference("load (rate labels)", la, lb, True))
        ma, mb = load_meaning(ca.load), load_meaning(cb.load)
        unknown = any(m is not None and "not recorded" in m for m in (ma, mb))
        if ma != mb or unknown:  # a load not recorded cannot be shown to be the other's
            out.append(Difference("load", ma, mb, True))
    if _busy(ea) != _busy(eb):
        out.append(Difference("host load warning", _busy(ea), _busy(eb), False))
    return sorted(out, key=lambda d: not d.hard)


def comparable(
    a: Report, b: Report, allow: frozenset[str] = frozenset()
) -> tuple[bool, list[Difference]]:
    diffs = differences(a, b, allow)
    return not any(d.hard for d in diffs), diffs


def describe(diffs: list[Difference]) -> str:
    return "; ".join(str(d) for d in diffs) or "same setup"
