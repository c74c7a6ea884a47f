"""Client overhead of kimi-bench's load generator vs sglang.bench_serving, on one
``kimi-bench serve`` (CPU), in one run (issue 22 item 2).

    PYTHONPATH=. /work/venv/bin/python scripts/client-overhead.py \\
        --sglang-python /work/kb-sglang/bin/python [--repeats 6] [--out DIR]

Overhead = the client's mean TTFT minus the server's mean TTFT over the same requests (the
server's ``kimi_bench_time_to_first_token_seconds`` histogram, scraped before and after
each measurement). Per rate (a burst: ``inf``, and 4 req/s) and repeat, both clients run
back to back against the same server process, in alternating order (A B, B A, ...), with
the same request shape: one random 640x480 JPEG (quality 85) and a short text prompt per
request, 4 output tokens. Each measurement starts with one warm-up request of our own
(outside the scrape window), so the server's counts hold exactly the measured requests.

sglang.bench_serving runs in the SGLang env (``scripts/sglang-env.sh``) through
``tests/sglang/bench_serving_launcher.py``; its ``image`` dataset needs a processor, so a
tiny LLaVA-style one (WordLevel tokenizer, CLIP image processor, no weights) is built
locally first and served under its path as the model name (``kimi-bench serve --model``).
Writes ``client-overhead.json`` and ``client-overhead.md`` under ``--out``; the host load
is recorded around every measurement (the machine is shared)."""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = ROOT / "tests" / "sglang" / "bench_serving_launcher.py"
TTFT = "kimi_bench_time_to_first_token_seconds"
PROMPT_WORDS = 8  # sglang's --random-input-len; our prompt has as many words
PROMPT = " ".join(f"t{i}" for i in range(1, PROMPT_WORDS + 1))
CLIENTS = ("kimi-bench", "sglang.bench_serving")
BASELINE = "kimi-bench before (httpx)"  # --baseline REV: the client as it was at REV

BUILD_PROCESSOR = r"""
import sys
from kimi_bench.sglang_ref.runtime import _torchvision_without_ops
_torchvision_without_ops()
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                          LlavaProcessor, PreTrainedTokenizerFast)
out = sys.argv[1]
words = ["<unk>", "<s>", "</s>", "<image>"] + [f"t{i}" for i in range(500)]
tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
tok.decoder = decoders.WordPiece(prefix="##")
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                               eos_token="</s>")
fast.add_special_tokens({"additional_special_tokens": ["<image>"]})
template = ("{% for m in messages %}{% if m['content'] is string %}{{ m['content'] }}"
            "{% else %}{% for c in m['content'] %}{% if c['type'] == 'text' %}{{ c['text'] }}"
            "{% else %}<image> {% endif %}{% endfor %}{% endif %}{% endfor %}")
fast.chat_template = template
ip = CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
LlavaProcessor(image_processor=ip, tokenizer=fast, patch_size=14, chat_template=template,
               vision_feature_select_strategy="default",
               num_additional_image_tokens=0).save_pretrained(out)
vision = CLIPVisionConfig(hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                          num_attention_heads=2, image_size=28, patch_size=14)
text = LlamaConfig(vocab_size=len(words), hidden_size=8, intermediate_size=16,
                   num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2)
LlavaConfig(vision_config=vision, text_config=text, image_token_index=3).save_pretrained(out)
"""
BASELINE_RUN = r"""
import json, pathlib, statistics, sys
from kimi_bench.serving.client import ClientOptions, drive
from kimi_bench.serving.trace import arrival_offsets, make_trace
url, model, rate, seed, n, max_tokens, pool_dir, prompt = sys.argv[1:]
pool = [p.read_bytes() for p in sorted(pathlib.Path(pool_dir).glob("*.jpg"))]
trace = make_trace(arrival_offsets(float(rate), int(n), 1.0, int(seed)), pool, 1, prompt=prompt)
res = drive(url, trace, ClientOptions(model=model, max_tokens=int(max_tokens)))
t = [r.ttft_ms for r in res.records if r.ok and r.ttft_ms is not None]
print(json.dumps({"completed": len(t), "client_ttft_mean_ms": statistics.fmean(t)}))
"""
VERSIONS = r"""
import importlib.metadata as m, json
print(json.dumps({p: m.version(p) for p in ("sglang", "aiohttp", "transformers")}))
"""


NOTES = [
    "overhead = client mean TTFT - server mean TTFT (kimi_bench_time_to_first_token_seconds "
    "delta over the measurement); the server's TTFT starts when it has the request head "
    "and ends when its first token is ready, so the overhead holds connecting, writing "
    "the body, the server's HTTP layer both ways and the client's own loop.",
    "sglang.bench_serving opens a new aiohttp session (and connection) per request; "
    "kimi-bench's client opens its connections before offset 0 (serving/wire.py).",
    "the two clients' arrival offsets differ at rate 4 (each draws its own Poisson "
    "arrivals from the seed), so their requests meet different server batches and their "
    "TTFTs differ; the overhead is taken against the server's TTFT of the same requests.",
    "2-core machine shared with other agents: host load is recorded per measurement; "
    "the server and both clients compete for the same cores.",
]


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sglang-python", default="/work/kb-sglang/bin/python")
    p.add_argument("--requests", type=int, default=20)
    p.add_argument("--rates", default="inf,4")
    p.add_argument("--repeats", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-tokens", type=int, default=4)
    p.add_argument("--out", type=Path, default=ROOT / "reports/interop/client-overhead")
    p.add_argument("--baseline", help="also measure the client of this commit (git archive)")
    p.add_argument("--render", type=Path, help="only rewrite the markdown of this JSON")
    return p.parse_args()


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _server_ttft(url: str) -> tuple[float, float]:
    from kimi_bench.serving.metrics import scrape_metrics

    values = scrape_metrics(url).values
    return values[(f"{TTFT}_sum", ())], values[(f"{TTFT}_count", ())]


def _warm(url: str, model: str, image_url: str) -> None:
    """One request of the measured shape, outside the scrape window."""
    import httpx

    content = [{"type": "image_url", "image_url": {"url": image_url}},
               {"type": "text", "text": "t1 t2"}]  # fmt: skip
    body = {"model": model, "stream": True, "max_tokens": 1,
            "messages": [{"role": "user", "content": content}]}  # fmt: skip
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=300,
                      trust_env=False) as r:  # fmt: skip
        r.read()
        if r.status_code != 200:
            raise SystemExit(f"warm-up request failed: HTTP {r.status_code}")


def _kimi_bench(url: str, model: str, rate: float, seed: int, a: argparse.Namespace,
                pool: list[bytes]) -> dict[str, Any]:  # fmt: skip
    from kimi_bench.options import ServeOptions
    from kimi_bench.serving.client import ClientOptions, drive
    from kimi_bench.serving.trace import arrival_offsets, make_trace

    trace = make_trace(arrival_offsets(rate, a.requests, 1.0, seed), pool, 1, prompt=PROMPT)
    client = ClientOptions.from_options(
        ServeOptions(max_tokens=a.max_tokens, warmup_requests=0), model
    )
    res = drive(url, trace, client)
    ttfts = [r.ttft_ms for r in res.records if r.ok and r.ttft_ms is not None]
    late = sorted(r.lateness_ms for r in res.records if r.lateness_ms is not None)
    return {
        "completed": len(ttfts),
        "client_ttft_mean_ms": statistics.fmean(ttfts) if ttfts else math.nan,
        "send_lateness_p50_ms": late[len(late) // 2] if late else None,
        "send_lateness_p99_ms": late[min(len(late) - 1, math.ceil(0.99 * len(late)) - 1)]
        if late
        else None,
        "send_lateness_max_ms": late[-1] if late else None,
    }


def _sglang(url: str, model: str, rate: float, seed: int, a: argparse.Namespace,
            work: Path) -> dict[str, Any]:  # fmt: skip
    out = work / f"sglang-{rate}-{seed}.jsonl"
    cmd = [a.sglang_python, str(LAUNCHER), "--backend", "sglang-oai-chat", "--base-url", url,
           "--model", model, "--tokenizer", model, "--dataset-name", "image",
           "--image-resolution", "480x640", "--image-format", "jpeg", "--image-content",
           "random", "--image-count", "1", "--random-input-len", str(PROMPT_WORDS),
           "--random-output-len", str(a.max_tokens), "--num-prompts", str(a.requests),
           "--request-rate", str(rate), "--seed", str(seed), "--warmup-requests", "0",
           "--output-file", str(out), "--output-details", "--disable-tqdm"]  # fmt: skip
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": path}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=work, env=env)
    if res.returncode != 0:
        raise SystemExit("sglang.bench_serving failed:\n" + res.stdout[-3000:] + res.stderr[-3000:])
    result = json.loads(out.read_text().splitlines()[-1])
    return {"completed": result["completed"], "client_ttft_mean_ms": result["mean_ttft_ms"]}


def _baseline(url: str, model: str, rate: float, seed: int, a: argparse.Namespace,
              ctx: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """The same trace through the client of ``--baseline`` (its own package on the path)."""
    cmd = [sys.executable, "-c", BASELINE_RUN, url, model, str(rate), str(seed),
           str(a.requests), str(a.max_tokens), str(ctx["pool_dir"]), PROMPT]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ctx["baseline_dir"])}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=ctx["work"])
    if res.returncode != 0:
        raise SystemExit("the baseline client failed:\n" + res.stderr[-3000:])
    return dict(json.loads(res.stdout.splitlines()[-1]))


def _measure(client: str, url: str, model: str, rate: float, seed: int,
             a: argparse.Namespace, ctx: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """One client, one trace, bracketed by /metrics scrapes."""
    _warm(url, model, ctx["image_url"])
    load_before = _load()
    sum0, count0 = _server_ttft(url)
    if client == "kimi-bench":
        row = _kimi_bench(url, model, rate, seed, a, ctx["pool"])
    elif client == BASELINE:
        row = _baseline(url, model, rate, seed, a, ctx)
    else:
        row = _sglang(url, model, rate, seed, a, ctx["work"])
    time.sleep(0.3)  # the last requests' metrics land
    sum1, count1 = _server_ttft(url)
    server_ms = (sum1 - sum0) / (count1 - count0) * 1e3 if count1 > count0 else math.nan
    overhead = row["client_ttft_mean_ms"] - server_ms
    row.update(client=client, rate="inf" if math.isinf(rate) else f"{rate:g}", seed=seed,
               server_requests=int(count1 - count0), server_ttft_mean_ms=server_ms,
               overhead_ms=overhead, overhead_pct=overhead / row["client_ttft_mean_ms"] * 100,
               load_before=load_before, load_after=_load())  # fmt: skip
    return row


def _summary(rows: list[dict[str, Any]], rates: list[str]) -> list[dict[str, Any]]:
    out = []
    clients = list(dict.fromkeys(r["client"] for r in rows))
    for rate in rates:
        per = {c: [r for r in rows if r["rate"] == rate and r["client"] == c] for c in clients}
        for client, rs in per.items():
            ov = [r["overhead_ms"] for r in rs]
            out.append({
                "rate": rate, "client": client, "repeats": len(rs),
                "overhead_median_ms": statistics.median(ov),
                "overhead_min_ms": min(ov), "overhead_max_ms": max(ov),
                "overhead_median_pct": statistics.median(r["overhead_pct"] for r in rs),
                "client_ttft_median_ms": statistics.median(r["client_ttft_mean_ms"] for r in rs),
                "server_ttft_median_ms": statistics.median(r["server_ttft_mean_ms"] for r in rs),
                "counts_match": all(r["server_requests"] == r["completed"] for r in rs),
            })  # fmt: skip
        kb, sg = per[CLIENTS[0]], per[CLIENTS[1]]
        diffs = [k["overhead_ms"] - s["overhead_ms"] for k, s in zip(kb, sg, strict=True)]
        row = next(o for o in out if o["rate"] == rate and o["client"] == CLIENTS[1])
        row["paired_kimi_minus_sglang_median_ms"] = statistics.median(diffs)
        row["kimi_bench_lower_in"] = f"{sum(d < 0 for d in diffs)} of {len(diffs)}"
    return out


def _markdown(doc: dict[str, Any]) -> str:
    env, cfg = doc["environment"], doc["config"]
    lines = [
        "# Client overhead: kimi-bench vs sglang.bench_serving on one kimi-bench serve",
        "",
        f"- created {env['created']}, commit {env['git'].get('commit')} "
        f"(dirty: {env['git'].get('dirty')}), seed {env['seed']}",
        f"- device: {env['device_name']} ({env['cpu_count']} CPUs), python {env['python']}, "
        f"torch {env['torch']}, kimi-bench {env['package_version']}, "
        + ", ".join(f"{k} {v}" for k, v in doc["peer_versions"].items()),
        f"- host load (1/5/15 min) at start {doc['host_load_start']}, at end "
        f"{doc['host_load_end']}; per measurement in the JSON",
        f"- {cfg['requests']} requests per measurement, rates {cfg['rates']}, "
        f"{cfg['repeats']} repeats per rate and client ({', '.join(cfg['clients'])}; "
        f"baseline commit {cfg['baseline_commit']}), order alternates (A B C, C B A, ...); "
        "one random 640x480 JPEG and an 8-word prompt per request, 4 output tokens",
        f"- server: `{' '.join(cfg['server_argv'])}`",
        "",
        "| rate | client | repeats | overhead median ms (min..max) | % of TTFT | "
        "client TTFT ms | server TTFT ms | counts match |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in doc["summary"]:
        lines.append(
            f"| {s['rate']} | {s['client']} | {s['repeats']} | {s['overhead_median_ms']:.1f} "
            f"({s['overhead_min_ms']:.1f}..{s['overhead_max_ms']:.1f}) | "
            f"{s['overhead_median_pct']:.2f} | {s['client_ttft_median_ms']:.0f} | "
            f"{s['server_ttft_median_ms']:.0f} | {s['counts_match']} |"
        )
    lines += ["", "## Verdict", "", doc["verdict"], "", "## Notes", ""]
    lines += [f"- {n}" for n in doc["notes"] + _derived_notes(doc)]
    lines += ["", "## Per measurement", "", "| rate | repeat | client | overhead ms | "
              "client TTFT ms | server TTFT ms | completed / server count | lateness p99 ms | "
              "load 1m before/after |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in doc["measurements"]:
        late = r.get("send_lateness_p99_ms")
        lines.append(
            f"| {r['rate']} | {r['repeat']} | {r['client']} | {r['overhead_ms']:.1f} | "
            f"{r['client_ttft_mean_ms']:.0f} | {r['server_ttft_mean_ms']:.0f} | "
            f"{r['completed']} / {r['server_requests']} | "
            f"{'' if late is None else f'{late:.2f}'} | "
            f"{r['load_before'][0]} / {r['load_after'][0]} |"
        )
    return "\n".join(lines) + "\n"


def _derived_notes(doc: dict[str, Any]) -> list[str]:
    """What the measurements say beyond the table: kimi-bench's send lateness against the
    5 ms warning level, and the host-load warning."""
    late = [r["send_lateness_p99_ms"] for r in doc["measurements"]
            if r.get("send_lateness_p99_ms") is not None]  # fmt: skip
    notes = []
    if late:
        over = sum(x > 5.0 for x in late)
        notes.append(
            f"kimi-bench's send lateness p99 per measurement: {min(late):.1f}..{max(late):.1f} "
            f"ms (median {statistics.median(late):.1f}); {over} of {len(late)} above serve-ab's "
            "5 ms warning level. On this loaded host the event loop of every process waits "
            "for a core; sglang.bench_serving records no lateness to compare."
        )
    warning = doc["environment"]["host_load"].get("warning")
    return notes + ([warning] if warning else [])


def _verdict(summary: list[dict[str, Any]]) -> tuple[str, list[str]]:
    parts, notes = [], []
    for s in summary:
        if s["client"] != CLIENTS[1]:
            continue
        kb = next(x for x in summary if x["rate"] == s["rate"] and x["client"] == CLIENTS[0])
        met = kb["overhead_median_ms"] <= s["overhead_median_ms"]
        parts.append(
            f"rate {s['rate']}: kimi-bench {kb['overhead_median_ms']:.1f} ms vs "
            f"sglang.bench_serving {s['overhead_median_ms']:.1f} ms median overhead "
            f"(paired kimi-bench minus sglang {s['paired_kimi_minus_sglang_median_ms']:+.1f} "
            f"ms, kimi-bench lower in {s['kimi_bench_lower_in']}): "
            + ("target met" if met else "TARGET NOT MET")
        )
        if not met:
            notes.append(
                f"rate {s['rate']}: kimi-bench's median overhead is above "
                "sglang.bench_serving's; see the per-measurement rows and host load."
            )
    before = [x for x in summary if x["client"] == BASELINE]
    if before:
        parts.append(
            "the client before this change (httpx): median overhead "
            + ", ".join(f"{x['overhead_median_ms']:.1f} ms at rate {x['rate']}" for x in before)
        )
    return "; ".join(parts), notes


def _context(a: argparse.Namespace, work: Path) -> tuple[dict[str, Any], list[str]]:
    """The image pool (in memory and as files for the baseline), the baseline's package."""
    from kimi_bench.engine.serve_job import encode_images
    from kimi_bench.serving.trace import data_url

    pool = encode_images((640, 480), 4, "random", "jpeg", a.seed)
    ctx: dict[str, Any] = {"pool": pool, "work": work, "pool_dir": work / "pool",
                           "image_url": data_url(pool[0], "image/jpeg")}  # fmt: skip
    ctx["pool_dir"].mkdir()
    for i, img in enumerate(pool):
        (ctx["pool_dir"] / f"{i}.jpg").write_bytes(img)
    clients = list(CLIENTS)
    if a.baseline:  # the client's code at that commit, unpacked beside the run
        ctx["baseline_dir"] = work / "baseline"
        ctx["baseline_dir"].mkdir()
        tar = subprocess.run(["git", "-C", str(ROOT), "archive", a.baseline, "kimi_bench"],
                             check=True, capture_output=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(ctx["baseline_dir"])], input=tar, check=True)
        clients.append(BASELINE)
    return ctx, clients


def main() -> None:
    a = _args()
    if a.render:
        a.render.with_suffix(".md").write_text(_markdown(json.loads(a.render.read_text())))
        return
    import torch

    from kimi_bench.infra.environment import environment, host_load
    from kimi_bench.serving.launch import ServerProcess, free_port

    rates = [float(x) for x in a.rates.split(",")]
    start = host_load()
    work = Path(tempfile.mkdtemp(prefix="client-overhead-"))
    proc_dir = work / "tiny-llava"
    subprocess.run([a.sglang_python, "-c", BUILD_PROCESSOR, str(proc_dir)], check=True,
                   capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    peers = json.loads(subprocess.run([a.sglang_python, "-c", VERSIONS], check=True,
                                      capture_output=True, text=True).stdout)  # fmt: skip
    model = str(proc_dir)
    port = free_port()
    argv = [sys.executable, "-m", "kimi_bench.cli.main", "serve", "--arm", "deferred",
            "--port", str(port), "--host", "127.0.0.1", "--model", model, "--ranks", "1",
            "--processor-workers", "1", "--device", "cpu"]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    ctx, clients = _context(a, work)
    rows = []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with ServerProcess(argv, url, work / "serve.log", start_timeout_s=300, env=env):
        for rate in rates:
            for rep in range(a.repeats):
                order = clients if rep % 2 == 0 else clients[::-1]
                for client in order:
                    row = _measure(client, url, model, rate, a.seed + rep, a, ctx)
                    row["repeat"] = rep
                    rows.append(row)
                    print(f"{row['rate']} #{rep} {client}: overhead {row['overhead_ms']:.1f} ms "
                          f"(client {row['client_ttft_mean_ms']:.0f}, server "
                          f"{row['server_ttft_mean_ms']:.0f}), load {row['load_after']}",
                          flush=True)  # fmt: skip
    labels = list(dict.fromkeys(r["rate"] for r in rows))
    summary = _summary(rows, labels)
    verdict, notes = _verdict(summary)
    notes += NOTES
    doc = {
        "kind": "client-overhead",
        "environment": environment(torch.device("cpu"), "kimi-k3", a.seed, load_start=start),
        "peer_versions": peers,
        "host_load_start": [round(x, 2) for x in (start.load_1m, start.load_5m, start.load_15m)],
        "host_load_end": _load(),
        "config": {
            "requests": a.requests,
            "rates": labels,
            "repeats": a.repeats,
            "max_tokens": a.max_tokens,
            "server_argv": argv[2:],
            "baseline_commit": a.baseline,
            "clients": clients,
        },
        "verdict": verdict,
        "summary": summary,
        "notes": notes,
        "measurements": rows,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "client-overhead.json").write_text(json.dumps(doc, indent=1) + "\n")
    (a.out / "client-overhead.md").write_text(_markdown(doc))
    print(verdict)


if __name__ == "__main__":
    main()
