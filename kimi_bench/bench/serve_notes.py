"""The notes of a serve-ab report: what ran (the emulator's stand-ins, or the external
servers), how each figure is measured, and the serving checks' findings: the SLOs of
goodput, image requests the server billed no image tokens for (a benchmark that never
reached the vision tower, sglang issue #21294), profiler traces and --profile-server's
answers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kimi_bench.bench.serve_report import STAGES, ServePart
from kimi_bench.bench.serve_runs import ServeRun
from kimi_bench.bench.serve_types import RequestRow, Versus
from kimi_bench.domain.runtime import get_profile
from kimi_bench.options import ServeOptions
from kimi_bench.pipeline import arms as arm_objects
from kimi_bench.report import access
from kimi_bench.results.serve_client import stream_openings
from kimi_bench.results.serve_rows import pct_name, serve_requests


def _endpoint_notes(opts: ServeOptions) -> list[str]:
    arms = opts.arm_names
    notes = [
        f"external OpenAI-compatible servers ({', '.join(arms)}): the same seeded trace "
        "(arrivals, images, prompt) is streamed to each; TTFT = first streamed content token "
        "at the client - time the request was sent. Throughput = completed requests / (last "
        "first token - trace start). Warm-up requests excluded. No per-stage times or copy "
        "ledger (a third-party server does not report them).",
        "A request counts as completed only when its stream finished (a finish_reason or "
        "[DONE]); a stream that stops early is failed (truncated). HTTP 429 is a failed "
        + (
            f"request after {opts.retry_429} retries honouring Retry-After"
            if opts.retry_429
            else "request (no retry; --retry-429 N retries)"
        )
        + f"; --request-timeout {opts.request_timeout_s:g} s bounds each request end to end.",
        "TTFT, ITL, TPOT and E2E intervals resample requests (each request of a server that "
        "reports no batches is one unit; requests of one batch are one unit when the server "
        "reports batches); throughput intervals resample repeats (one repeat: a point, no "
        "interval); repeats alternate the order of the arms.",
    ]
    if len(arms) > 1:
        notes.append(f"A/B: each endpoint vs the first, {arms[0]} (signed %, arm minus "
                     f"{arms[0]}).")  # fmt: skip
    else:
        notes.append(f"one endpoint ({arms[0]}): a plain benchmark, no A/B.")
    return notes


def emulator_notes(opts: ServeOptions, device: Any, profile: str) -> list[str]:
    import torch

    if opts.endpoints:
        return _endpoint_notes(opts)
    c = opts.standins
    notes = [
        "The vision encoder and the prefill are STAND-INS (matmul chains sized by patch and "
        f"token counts: {c.encoder_gflop_per_patch} GFLOP/patch, {c.prefill_gflop_per_token} "
        f"GFLOP/token split over {opts.ranks} ranks), not the model; the gather carries "
        "metadata only. TTFT ends at the first token after prefill"
        + (
            f"; each later token is a STAND-IN decode step (one token per running request per "
            f"step, {c.decode_gflop_per_token} GFLOP/token split over the ranks, batched "
            "with the prefills of newly scheduled requests), so ITL, TPOT and E2E latency "
            "include the decode under load."
            if opts.max_tokens > 1
            else "; there is no decode (--max-tokens 1)."
        ),
        "TTFT = first token time - time the request was sent. Throughput = completed "
        "requests / (last first token - trace start). Warm-up requests excluded. TTFT, ITL, "
        "TPOT and E2E intervals all resample forward batches (requests served together are "
        "one unit); throughput intervals resample repeats (one repeat: a point, no interval).",
        f"defaults: the {profile.upper()} profile ({opts.ranks} ranks, {opts.requests} "
        f"requests per rate and arm, {opts.width_height[0]}x{opts.width_height[1]} "
        "width x height).",
        f"runtime profile {opts.runtime_spec}: {get_profile(opts.runtime).description}; the "
        "copies table is the ledger of every pixel-byte move of the measured requests.",
    ]
    for a in arm_objects(opts.arms):
        if a.encoded_inputs and a.proposed:
            notes.append(
                f"{a.name} is a PROPOSED arm, {a.label}: its producers read only each image's "
                "header (the decode stage) and ship the encoded bytes; each owner decodes its "
                "images inside the step, after scheduling (a decode error then fails its "
                "request there, not at the producer)."
            )
        elif a.proposed:
            notes.append(f"{a.name} is PROPOSED, {a.label}.")
    if device.type == "cpu":
        notes.append(
            f"CPU only: stand-in FLOPs scaled by {c.cpu_flops_scale}; the device is emulated "
            "in host memory (each H2D/D2H is a host copy here). CPU timings do not predict "
            "GPU behaviour."
        )
    elif torch.cuda.device_count() < (opts.ranks or 1):
        gpus = torch.cuda.device_count()
        notes.append(
            f"{opts.ranks} ranks share {gpus} GPU(s): each rank's stand-in FLOPs are scaled "
            f"by {gpus}/{opts.ranks} so that stand-in device time per step matches "
            f"{opts.ranks} ranks on {opts.ranks} GPUs; host-to-device copies of all ranks "
            "still share one PCIe link."
        )
    return notes


@dataclass
class ServingNotes:
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    profiles: dict[str, list[str]] = field(default_factory=dict)  # arm -> trace files


def serving_notes(
    opts: ServeOptions, runs: Sequence[ServeRun], rows: list[RequestRow]
) -> ServingNotes:
    """Goodput's SLOs, unbilled images per (rate, arm), profiles and profiler answers."""
    textless = _textless_first_chunks(rows)
    out = ServingNotes()
    if opts.slos:
        slo = ", ".join(f"{k} <= {v:g} ms" for k, v in opts.slos.items())
        out.notes.append(
            f"goodput = requests that met every SLO ({slo}; a one-token request meets a TPOT "
            "SLO) per second of the repeat's duration (trace start to the last response's "
            "end), as vllm bench serve and sglang.bench_serving count it; mean over repeats."
        )
    out.notes.append(
        "ITL = every gap between two streamed chunks that carried text; TPOT = (E2E - TTFT) "
        "/ (output tokens - 1); E2E = send to the stream's end (sglang.bench_serving's and "
        "vllm bench serve's definitions); percentiles: "
        + ", ".join(pct_name(q) for q in opts.metric_percentiles)
        + "."
    )
    for key in dict.fromkeys((r.rate_label, r.arm) for r in runs):
        text_only = next((r.source.get("text_only_prompt_tokens") for r in runs
                          if r.arm == key[1] and r.source), None)  # fmt: skip
        mine = [r for r in rows if (r["rate"], r["arm"]) == key]
        n = sum(r.unbilled(text_only) for r in serve_requests(mine))
        if n:
            how = (
                f"usage.prompt_tokens <= the {text_only} of the same prompt without images"
                if text_only is not None
                else "usage.prompt_tokens_details.image_tokens 0"
            )
            out.warnings.append(
                f"WARNING: rate {key[0]}, {key[1]}: {n} image request(s) were billed no image "
                f"tokens ({how}): "
                "the images may never have reached the vision tower (sglang issue #21294); "
                "the latencies then measure a text-only model"
            )
    out.notes.extend(textless)
    if opts.profile is not None and not opts.endpoints:
        out.profiles = {arm: sorted(str(p) for p in (opts.profile / arm).glob("*.trace.json"))
                        for arm in opts.arms}  # fmt: skip
        named = "; ".join(f"{a}: {', '.join(Path(p).name for p in ps) or 'none written'}"
                          for a, ps in out.profiles.items())  # fmt: skip
        out.notes.append(
            f"torch profiler traces (Chrome trace JSON; stages as stage:<name> ranges) of each "
            f"emulator's producers and ranks under {opts.profile}/<arm>/: {named}."
        )
    for run in runs:
        for answer in (run.source or {}).get("profile_server") or []:
            if answer.get("warning") and answer["warning"] not in out.warnings:
                out.warnings.append(str(answer["warning"]))
    return out


@dataclass(frozen=True)
class RunNotes:
    """What a serve-ab report says in words: what ran (``emulator``), the stage that makes
    each TTFT difference, the deltas that are not significant, the verdict without an A/B
    (``one_arm``) and how it served (``serving``)."""

    emulator: list[str]
    stages: list[str]
    not_significant: list[str]
    one_arm: str
    serving: ServingNotes
    saturated: list[str] = field(default_factory=list)


def run_notes(
    opts: ServeOptions,
    device: Any,
    profile: str,
    runs: Sequence[ServeRun],
    part: ServePart,
    base: str,
) -> RunNotes:
    """The notes of a serve-ab report (``base``: the arm the others are compared with)."""
    return RunNotes(
        emulator=emulator_notes(opts, device, profile),
        stages=stage_notes(part.rows, base),
        not_significant=_not_significant(part.ab, opts),
        one_arm=_one_arm(part.rows, opts.arm_names),
        serving=serving_notes(opts, runs, part.requests),
        saturated=saturated_notes(part.rows),
    )


def stage_notes(rows: Sequence[dict[str, Any]], base: str) -> list[str]:
    """Per rate: per-request stage medians of the baseline vs each other arm and the stage
    that makes the largest part of the TTFT difference (signed: other minus baseline)."""
    by = {(r["rate"], r["arm"]): r for r in rows}
    out = []
    for rate, arm in dict.fromkeys((r["rate"], r["arm"]) for r in rows if r["arm"] != base):
        e, d = by.get((rate, base)), by.get((rate, arm))
        if not e or not d or any(f"{s}_ms" not in e or f"{s}_ms" not in d for s in STAGES):
            continue
        diffs = {s: d[f"{s}_ms"] - e[f"{s}_ms"] for s in STAGES}
        if any(math.isnan(v) for v in diffs.values()) or "ttft_median_ms" not in e:
            continue
        top = max(diffs, key=lambda s: abs(diffs[s]))
        parts = ", ".join(f"{s} {e[f'{s}_ms']:.1f}/{d[f'{s}_ms']:.1f}" for s in STAGES)
        out.append(
            f"rate {rate}: median TTFT eager {e['ttft_median_ms']:.0f} ms vs {arm} "
            f"{d.get('ttft_median_ms', math.nan):.0f} ms; per-request stage medians "
            f"eager/{arm} (ms): {parts}; the largest difference is {top} ({arm} minus eager "
            f"{diffs[top]:+.1f} ms)."
        )
    return out


def _not_significant(ab: dict[str, dict[str, Versus]], opts: ServeOptions) -> list[str]:
    """A note per rate and arm whose median TTFT delta is not significant, why, and which
    options would resolve it."""
    out = [
        f"rate {label}, {arm}: median TTFT delta not significant: {v['median_ttft']['verdict']}."
        for label, arms in ab.items()
        for arm, v in arms.items()
        if not v["median_ttft"]["significant"]
    ]
    if out:
        out.append(resolve_hint(opts))
    return out


def resolve_hint(opts: ServeOptions) -> str:
    """What would resolve an unresolved A/B: more independent units (requests, hence
    forward batches) and repeats (throughput has an interval only from 3 repeats)."""
    n, reps = opts.requests or 0, opts.repeats
    more = f"--num-prompts {max(4 * n, 40)} (now {n})" if n else "a larger --num-prompts"
    return (
        "NOT RESOLVED: a median TTFT difference this run cannot tell from noise. To resolve "
        f"it, give each arm more independent units: {more}, and --repeats 3 or more (now "
        f"{reps}; repeats also give throughput an interval and spread host drift over the "
        "arms). A busy host widens every interval: compare runs made at the same load."
    )


SATURATED = 0.8  # achieved below this share of the offered rate: the pipeline saturated


def saturated_notes(rows: Sequence[dict[str, Any]]) -> list[str]:
    """A note per rate and arm that achieved well below the rate it was offered: the
    pipeline could not keep up, so requests queued and TTFT grew with the queue. "Well
    below" allows for what a short trace cannot reach even when nothing queues: its
    requests over their arrival span plus the median TTFT."""
    out = []
    for row in rows:
        offered = access.offered_rate(str(row.get("rate")))
        got, n = row.get("req_per_s"), row.get("completed")
        if offered is None or not isinstance(got, (int, float)) or math.isnan(got):
            continue
        ttft_s = (access.number(row.get("ttft_median_ms")) or 0.0) / 1e3
        reachable = n / (n / offered + ttft_s) if isinstance(n, int) and n > 0 else offered
        if got < SATURATED * reachable:
            out.append(
                f"SATURATED: rate {row['rate']}, {row['arm']}: achieved {got:.3g} req/s of "
                f"{offered:g} offered ({got / offered:.0%}): the pipeline could not keep up, "
                "so requests queued and TTFT at this rate measures the queue."
            )
    return out


def _one_arm(rows: Sequence[dict[str, Any]], arms: Sequence[str]) -> str:
    parts = [
        f"{r['rate']}: {r['arm']} median TTFT {r.get('ttft_median_ms', math.nan):.1f} ms, "
        f"{r['req_per_s']:.3g} req/s, {r['completed']} completed"
        for r in rows
        if r["completed"]
    ]
    done = {r["arm"] for r in rows if r["completed"]}
    empty = [a for a in arms if a not in done]
    if len(arms) > 1 and empty:
        head = f"no A/B: {', '.join(empty)} completed no request"
        return head + ("; " + "; ".join(parts) if parts else "")
    return "one arm (no A/B): " + ("; ".join(parts) or "no completed request")


# a stream's first chunk counts as "before the first token" when it came this much earlier
# (a server that writes the role chunk with the first token puts microseconds between them)
TEXTLESS_LEAD_MS = 1.0


def _textless_first_chunks(rows: list[RequestRow]) -> list[str]:
    """Per (rate, arm) whose streams open with a chunk that carries no text (a role-only
    chunk, as transformers serve sends): where vllm bench serve's TTFT would end (its
    client stops the clock at the first chunk with choices) beside kimi-bench's and
    sglang.bench_serving's (the first chunk with text)."""
    out = []
    for key in dict.fromkeys((r["rate"], r["arm"]) for r in rows):
        pairs = [p for r in rows if (r["rate"], r["arm"]) == key
                 if (p := _chunk_and_text_ms(r)) is not None]  # fmt: skip
        early = [p for p in pairs if p[1] - p[0] >= TEXTLESS_LEAD_MS]
        if not early:  # then pairs is not empty either
            continue
        chunk, text = stream_openings(pairs)
        if text - chunk < TEXTLESS_LEAD_MS:
            continue
        out.append(
            f"rate {key[0]}, {key[1]}: {len(early)} of {len(pairs)} streams opened with a "
            f"chunk that carried no text (e.g. the role alone) {TEXTLESS_LEAD_MS:g} ms or more "
            "before the first token; "
            f"vllm bench serve stops TTFT at that chunk (median {chunk:.1f} ms here), "
            f"kimi-bench and sglang.bench_serving at the first text (median {text:.1f} ms); "
            "the rows keep both times (first_chunk_s, first_token_s)."
        )
    return out


def _chunk_and_text_ms(row: RequestRow) -> tuple[float, float] | None:
    """A served request's send-to-first-chunk and send-to-first-text times, in ms."""
    sent, chunk, text = row.get("sent_s"), row.get("first_chunk_s"), row.get("first_token_s")
    if row.get("ttft_ms") is None or sent is None or chunk is None or text is None:
        return None
    return (chunk - sent) * 1e3, (text - sent) * 1e3
