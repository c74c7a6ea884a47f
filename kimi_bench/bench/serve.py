"""``serve-ab``: the same arrival trace through an eager and a deferred serving pipeline of
real processes, at each request rate; TTFT and throughput per arm, A/B deltas with
intervals."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kimi_bench.bench.procs import Harness
from kimi_bench.bench.serve_workers import ServeJob, loadgen_main, producer_main, rank_main
from kimi_bench.bench.standins import StandinCost
from kimi_bench.config import PreprocessConfig
from kimi_bench.environment import resolve_device
from kimi_bench.runtime import DEFAULT_RUNTIME, get_profile

ARMS = ("eager", "deferred")


def arrival_offsets(
    rate: float, n: int, burstiness: float = 1.0, seed: int = 0
) -> tuple[float, ...]:
    """Seconds from the trace start for ``n`` requests.

    ``rate`` = inf sends everything at once; otherwise gaps are gamma distributed with
    shape ``burstiness`` and mean 1/rate (burstiness 1 = Poisson arrivals)."""
    if n < 0:
        raise ValueError("request count must be >= 0")
    if math.isinf(rate):
        return (0.0,) * n
    if rate <= 0 or burstiness <= 0:
        raise ValueError("rate and burstiness must be > 0")
    rng = np.random.default_rng([seed, int(rate * 1000)])
    gaps = rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    return tuple(float(x) for x in np.cumsum(gaps))


def parse_rates(text: str) -> list[float]:
    rates = []
    for part in text.split(","):
        p = part.strip().lower()
        try:
            r = math.inf if p in ("inf", "infinity") else float(p)
        except ValueError:
            raise ValueError(f"bad rate {part!r}: a number of requests/s or inf") from None
        if r <= 0 or math.isnan(r):
            raise ValueError(f"bad rate {part!r}: must be > 0")
        rates.append(r)
    return rates


def rate_label(rate: float) -> str:
    return "inf" if math.isinf(rate) else f"{rate:g}"


@dataclass
class ServeOptions:
    cfg: PreprocessConfig
    rates: list[float] = field(default_factory=lambda: [2.0, 8.0, math.inf])
    requests: int = 200
    images_per_request: int = 1
    resolution: tuple[int, int] = (1536, 1024)
    ranks: int = 8
    processor_workers: int = 2
    transport: str = "shm"
    arms: tuple[str, ...] = ARMS
    burstiness: float = 1.0
    warmup_requests: int = 4
    repeats: int = 1
    seed: int = 0
    device: str = "auto"
    image_format: str = "jpeg"
    image_content: str = "random"
    unique_images: int = 16
    request_timeout_s: float = 60.0
    runtime: str = DEFAULT_RUNTIME
    cost: StandinCost = field(default_factory=StandinCost)
    fault: str | None = None
    notes: tuple[str, ...] = ()  # free-form explanations carried into the report

    def validate(self) -> None:
        if not self.rates:
            raise ValueError("--rates needs at least one rate")
        if min(self.requests, self.ranks, self.processor_workers, self.repeats) < 1:
            raise ValueError("--requests, --ranks, --processor-workers, --repeats must be >= 1")
        if self.images_per_request < 1 or self.unique_images < 1:
            raise ValueError("--images-per-request and unique_images must be >= 1")
        if self.transport not in ("shm", "pickle"):
            raise ValueError(f"--transport must be shm or pickle, got {self.transport!r}")
        bad = [a for a in self.arms if a not in ARMS]
        if bad or not self.arms:
            raise ValueError(f"--arms takes eager and/or deferred, got {','.join(self.arms)}")
        if self.image_format not in ("jpeg", "png"):
            raise ValueError(f"--image-format must be jpeg or png, got {self.image_format!r}")
        if self.image_content not in ("random", "blank", "photo"):
            raise ValueError("--image-content must be random, blank or photo")
        if self.burstiness <= 0:
            raise ValueError("--burstiness must be > 0")
        get_profile(self.runtime)


def serve_options(
    section: dict[str, Any], overrides: dict[str, Any] | None = None, **extra: Any
) -> ServeOptions:
    """A ``[serve_ab]`` scenario table (see ``scenarios/serve-ab.toml``) with non-None
    ``overrides`` (CLI options) on top; keys neither sets take the ServeOptions defaults.
    ``extra`` passes fields that have no scenario key (``config_path``, ``notes``)."""
    from kimi_bench.bench.images import parse_resolution
    from kimi_bench.config import resolve_config

    v = {**section, **{k: x for k, x in (overrides or {}).items() if x is not None}}
    base = ServeOptions(cfg=resolve_config(v.get("preset", "kimi-k3"), extra.get("config_path")))
    rates, arms = v.get("rates", base.rates), v.get("arms", base.arms)
    if isinstance(rates, (list, tuple)):
        rates = ",".join(map(str, rates))
    if isinstance(arms, str):
        arms = arms.split(",")
    res = v.get("resolution", base.resolution)
    return ServeOptions(
        cfg=base.cfg,
        rates=parse_rates(str(rates)),
        requests=v.get("requests", base.requests),
        images_per_request=v.get("images_per_request", base.images_per_request),
        resolution=parse_resolution(res) if isinstance(res, str) else res,
        ranks=v.get("ranks", base.ranks),
        processor_workers=v.get("processor_workers", base.processor_workers),
        transport=v.get("transport", base.transport),
        arms=tuple(a.strip() for a in arms if a.strip()),
        burstiness=float(v.get("burstiness", base.burstiness)),
        warmup_requests=v.get("warmup_requests", base.warmup_requests),
        repeats=v.get("repeats", base.repeats),
        seed=v.get("seed", base.seed),
        device=v.get("device", base.device),
        image_format=v.get("image_format", base.image_format),
        image_content=v.get("image_content", base.image_content),
        unique_images=v.get("unique_images", base.unique_images),
        request_timeout_s=float(v.get("request_timeout_s", base.request_timeout_s)),
        runtime=str(v.get("runtime", base.runtime)),
        cost=StandinCost(**v.get("standins", {})),
        notes=tuple(extra.get("notes", ())),
    )


class ServeFailed(RuntimeError):
    def __init__(self, message: str, runs: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.runs = runs


def run_pipeline(opts: ServeOptions, arm: str, arrivals: tuple[float, ...]) -> dict[str, Any]:
    """One arm through one arrival trace; returns its per-request records."""
    dev = resolve_device(opts.device)
    harness = Harness()
    job = ServeJob(
        cfg=opts.cfg,
        arm=arm,
        ranks=opts.ranks,
        workers=opts.processor_workers,
        transport=opts.transport,
        device=dev.type,
        resolution=opts.resolution,
        images_per_request=opts.images_per_request,
        image_format=opts.image_format,
        image_content=opts.image_content,
        unique_images=opts.unique_images,
        seed=opts.seed,
        arrivals=arrivals,
        warmup_requests=opts.warmup_requests,
        cost=opts.cost,
        prefix=harness.prefix,
        init_file=harness.init_file,
        request_timeout_s=opts.request_timeout_s,
        runtime=opts.runtime,
        fault=opts.fault,
    )
    records: list[dict[str, Any]] = []
    out: dict[str, Any] = {"arm": arm, "records": records, "trace_start": None, "error": None}
    try:
        req_q, warm_evt = harness.ctx.Queue(), harness.ctx.Event()
        pipes = [harness.pipe() for _ in range(opts.processor_workers)]
        for r in range(opts.ranks):
            conns = [p[1] for p in pipes] if r == 0 else []
            harness.start(f"rank{r}", rank_main, job, r, conns, req_q, warm_evt)
        for w, (send_end, _) in enumerate(pipes):
            harness.start(f"producer{w}", producer_main, job, w, req_q, send_end)
        harness.start("loadgen", loadgen_main, job, req_q, warm_evt)
        budget = opts.request_timeout_s + 120.0
        for kind, payload in harness.messages(budget):
            if kind == "request" and not payload["warm"]:
                records.append(payload)
            elif kind == "ledger":
                out["copies"] = payload
            elif kind == "trace_start":
                out["trace_start"] = payload
            elif kind == "stalled":
                out["error"] = f"{payload} request(s) timed out after {opts.request_timeout_s} s"
                break  # the ranks are done; stop() below ends any wedged producer
    except KeyboardInterrupt:
        out["error"] = "interrupted by the user (Ctrl-C)"
    except Exception as exc:
        out["error"] = str(exc).splitlines()[0]
    finally:
        out["leftover_segments"] = len(harness.stop())
    return out


def run_serve_ab(
    opts: ServeOptions,
    on_run: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every (rate, repeat, arm) pipeline; ``on_run`` sees the runs so far after each
    (for partial reports). Raises ServeFailed with the partial runs on a failure."""
    opts.validate()
    runs: list[dict[str, Any]] = []
    for i, rate in enumerate(opts.rates):
        for rep in range(opts.repeats):
            trace = arrival_offsets(rate, opts.requests, opts.burstiness, opts.seed + 7919 * rep)
            for arm in opts.arms:
                res = run_pipeline(opts, arm, trace)
                res.update(
                    rate=rate,
                    rate_label=rate_label(rate),
                    repeat=rep,
                    rate_index=i,
                    arrivals=list(trace),
                )
                runs.append(res)
                if on_run:
                    on_run(runs)
                if res["error"] and "timed out" not in res["error"]:
                    raise ServeFailed(f"{arm} at rate {rate_label(rate)}: {res['error']}", runs)
    return runs
