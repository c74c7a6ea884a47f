"""Write vllm-a.json / vllm-a-summary.json in the layout of ``vllm bench serve
--save-result [--save-detailed]`` (vllm/benchmarks/serve.py: the ``result_json`` dict,
detail lists removed without --save-detailed). NOT produced by running vLLM (vLLM does not
install on this CPU machine): the per-request times are sglang-a.jsonl's real TTFTs and
ITLs (the same kind of client against the same ``kimi-bench serve``), re-laid out in
vLLM's fields. Run: python tests/data/peers/make_vllm_fixture.py"""

import json
import statistics
from pathlib import Path

import numpy as np

here = Path(__file__).parent
src = json.loads((here / "sglang-a.jsonl").read_text().splitlines()[0])
ttfts, itls = src["ttfts"], src["itls"]
lat = [t + sum(i) for t, i in zip(ttfts, itls, strict=True)]
ms = [t * 1e3 for t in ttfts]
gaps = [x * 1e3 for i in itls for x in i]
n = len(ttfts)
tpots = [(e - t) * 1e3 / (k - 1) for e, t, k in zip(lat, ttfts, src["output_lens"], strict=True)
         if k > 1]  # fmt: skip
detail = {
    "input_lens": src["input_lens"], "output_lens": src["output_lens"], "ttfts": ttfts,
    "itls": itls, "latencies": lat, "start_times": [0.001 * i for i in range(n)],
    "queue_times": [0.0] * n, "generated_texts": src["generated_texts"], "errors": [""] * n,
}  # fmt: skip
result = {
    "date": "20261201-070000", "endpoint_type": "openai-chat", "backend": "openai-chat",
    "label": None, "model_id": "kimi-bench-emulator", "tokenizer_id": "tok",
    "num_prompts": n, "num_processes": 1, "request_rate": "inf", "burstiness": 1.0,
    "max_concurrency": None, "duration": src["duration"], "completed": n, "failed": 0,
    "total_input_tokens": sum(src["input_lens"]), "total_output_tokens": sum(src["output_lens"]),
    "request_throughput": n / src["duration"], "request_goodput": None,
    "output_throughput": sum(src["output_lens"]) / src["duration"],
    "total_token_throughput": (sum(src["input_lens"]) + sum(src["output_lens"])) / src["duration"],
    **detail,
    "max_output_tokens_per_s": 14.0, "max_concurrent_requests": n, "rtfx": 0.0,
    "mean_ttft_ms": statistics.mean(ms), "median_ttft_ms": statistics.median(ms),
    "std_ttft_ms": statistics.pstdev(ms), "p99_ttft_ms": float(np.percentile(ms, 99)),
    # vllm's calculate_metrics: TPOT = (latency - ttft) / (output_len - 1), output_len > 1
    "mean_tpot_ms": float(np.mean(tpots)), "median_tpot_ms": float(np.median(tpots)),
    "std_tpot_ms": float(np.std(tpots)), "p99_tpot_ms": float(np.percentile(tpots, 99)),
    # vllm's calculate_metrics: every gap of the successful requests pooled, numpy
    "mean_itl_ms": float(np.mean(gaps)), "median_itl_ms": float(np.median(gaps)),
    "p99_itl_ms": float(np.percentile(gaps, 99)),
}  # fmt: skip
(here / "vllm-a.json").write_text(json.dumps(result))
summary = {k: v for k, v in result.items() if k not in detail or k in ("latencies", "queue_times")}
(here / "vllm-a-summary.json").write_text(json.dumps(summary))
