"""A soak of ``kimi-bench serve``: closed-loop clients (each sends its next request as
soon as the last one ended, so the pipeline runs at its capacity) mixing good requests
with hostile ones (a body over the limit, a file that is not an image, an image that
does not decode, a body that is not JSON, a decompression-bomb PNG) and clients that
leave mid-stream or mid-body. Meanwhile it samples the RSS of the server and every
process under it (from /proc), its shared-memory segments, /health, and the host load.

``run_soak`` returns everything as one JSON-able dict; the test asserts on it and can
write it as a report (``KB_SOAK_REPORT``)."""

from __future__ import annotations

import io
import json
import os
import random
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from PIL import Image

from kimi_bench.pipeline.transport import list_segments
from tests.serve_helpers import CHAT, chat_body, jpeg, png_bomb, requests_by_outcome

MAX_BODY_MB = 1  # the soak's server runs with --max-body-mb 1

# kind -> (weight, status the server must answer; None: the client leaves, no status)
KINDS: dict[str, tuple[int, int | None]] = {
    "good_stream": (50, 200),
    "good_plain": (10, 200),
    "too_large_body": (5, 413),
    "not_an_image": (5, 400),
    "truncated_image": (5, 400),
    "bad_json": (5, 400),
    "bomb_png": (5, 400),
    "leaves_mid_stream": (10, None),
    "leaves_mid_body": (5, None),
}
# what the server's /metrics must count for each kind (outcome of kimi_bench_requests_total)
SERVER_OUTCOME = {
    "good_stream": "ok",
    "good_plain": "ok",
    "too_large_body": "bad_request",
    "not_an_image": "bad_request",
    "truncated_image": "error",  # the producer cannot decode it: the backend fails it (400)
    "bad_json": "bad_request",
    "bomb_png": "bad_request",
    "leaves_mid_stream": "disconnected",
    "leaves_mid_body": "disconnected",
}


@dataclass
class Payloads:
    good: list[bytes]
    bomb: bytes
    truncated: bytes
    too_large: bytes = field(default=b"")

    @classmethod
    def make(cls) -> Payloads:
        buf = io.BytesIO()
        Image.effect_noise((320, 240), 60).convert("RGB").save(buf, "JPEG")
        body = b'{"pad": "' + b"x" * (MAX_BODY_MB * 2**20) + b'"}'
        return cls(
            good=[jpeg(i, (320, 240)) for i in range(4)],
            bomb=png_bomb(12000, 12000),
            truncated=buf.getvalue()[: buf.tell() // 2],
            too_large=body,
        )


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: Counter[str] = field(default_factory=Counter)
    as_expected: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)  # kind: what came instead
    statuses: Counter[str] = field(default_factory=Counter)  # "kind status"

    def note(self, kind: str, status: int | None, problem: str | None = None) -> None:
        with self.lock:
            self.sent[kind] += 1
            self.statuses[f"{kind} {status}"] += 1
            if problem is None:
                self.as_expected[kind] += 1
            elif len(self.unexpected) < 50:
                self.unexpected.append(f"{kind}: {problem}")


Answer = tuple[int | None, str | None]  # (status, what was wrong or None)


def _one(c: httpx.Client, kind: str, p: Payloads, rng: random.Random) -> Answer:
    """Send one request of ``kind``; (status, problem or None)."""
    want = KINDS[kind][1]
    if kind == "good_stream":
        body = chat_body([rng.choice(p.good)], 8, stream=True)
        with c.stream("POST", CHAT, json=body) as r:
            text = r.read().decode()
        tokens = len(re.findall(r'"content": "[^"]+"', text))  # one token per chunk
        done = text.rstrip().endswith("data: [DONE]") and tokens == 8
        if r.status_code == 200 and done:
            return r.status_code, None
        return r.status_code, f"{r.status_code} {text[-200:]!r}"
    if kind == "leaves_mid_stream":
        body = chat_body([rng.choice(p.good)], 4000, stream=True)
        with c.stream("POST", CHAT, json=body) as r:
            for i, _line in enumerate(r.iter_lines()):
                if i >= rng.randint(1, 6):
                    break
        return r.status_code, None if r.status_code == 200 else f"{r.status_code}"
    if kind == "leaves_mid_body":
        raw = json.dumps(chat_body([rng.choice(p.good)], stream=True)).encode()
        head = f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(raw)}\r\n\r\n".encode()
        with socket.create_connection((c.base_url.host, c.base_url.port), timeout=30) as s:
            s.sendall(head + raw[: rng.randint(1, len(raw) - 1)])
        return None, None
    content: bytes | None = None
    if kind == "good_plain":
        payload = chat_body([rng.choice(p.good)], 4)
    elif kind == "too_large_body":
        payload, content = None, p.too_large
    elif kind == "not_an_image":
        payload = chat_body([rng.randbytes(rng.randint(1, 2000))])
    elif kind == "truncated_image":
        payload = chat_body([p.truncated])
    elif kind == "bad_json":
        payload, content = None, b'{"model": "x", "messages": [' + rng.randbytes(20)
    else:  # bomb_png
        payload = chat_body([p.bomb])
    if payload is not None:
        r = c.post(CHAT, json=payload)
    else:
        r = c.post(CHAT, content=content, headers={"Content-Type": "application/json"})
    if r.status_code != want:
        return r.status_code, f"{r.status_code} {r.text[:200]!r}"
    if want >= 400 and "error" not in r.json():
        return r.status_code, f"no OpenAI error object: {r.text[:200]!r}"
    return r.status_code, None


def _client(url: str, seed: int, until: float, p: Payloads, tally: Tally) -> None:
    rng = random.Random(seed)
    kinds, weights = list(KINDS), [w for w, _ in KINDS.values()]
    with httpx.Client(base_url=url, timeout=120, trust_env=False) as c:
        while time.monotonic() < until:
            kind = rng.choices(kinds, weights)[0]
            try:
                status, problem = _one(c, kind, p, rng)
            except httpx.HTTPError as exc:
                status, problem = None, f"{type(exc).__name__}: {exc}"
            tally.note(kind, status, problem)


def _rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return 0  # a zombie has no VmRSS


def _tree(pid: int) -> list[int]:
    """``pid`` and every process under it (from /proc/<pid>/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def _cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes used so far."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return total / os.sysconf("SC_CLK_TCK")


def _running(c: httpx.Client) -> float | None:
    from kimi_bench.serving.metrics import parse_metrics

    try:
        snap = parse_metrics(c.get("/metrics").text)
    except httpx.HTTPError:
        return None
    return snap.values.get(("kimi_bench_requests_running", ()))


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _sampler(url: str, pid: int, until: float, every_s: float, out: list[dict[str, Any]]) -> None:
    t0 = last_t = time.monotonic()
    last_cpu = _cpu_s(_tree(pid))
    with httpx.Client(base_url=url, timeout=30, trust_env=False) as c:
        while True:
            now = time.monotonic()
            tree = _tree(pid)
            rss = {str(p): _rss_kb(p) for p in tree}
            cpu = _cpu_s(tree)
            cpus = (cpu - last_cpu) / max(1e-3, now - last_t)  # busy cores meanwhile
            last_cpu, last_t = cpu, now
            h0 = time.perf_counter()
            try:
                health: int | str = c.get("/health").status_code
            except httpx.HTTPError as exc:
                health = type(exc).__name__
            health_ms = (time.perf_counter() - h0) * 1e3
            out.append(
                {
                    "t_s": round(now - t0, 2),
                    "rss_mib": round(sum(v or 0 for v in rss.values()) / 1024, 1),
                    "server_rss_mib": round((rss.get(str(pid)) or 0) / 1024, 1),
                    "processes": len(rss),
                    "segments": len(list_segments(f"kimibench_{pid}_")),
                    "in_flight": _running(c),
                    "cpu_cores": round(cpus, 2),
                    "health": health,
                    "health_ms": round(health_ms, 1),
                    "loadavg_1m": float(Path("/proc/loadavg").read_text().split()[0]),
                }
            )
            if now >= until:
                return
            time.sleep(max(0.0, every_s - (time.monotonic() - now)))


def run_soak(
    url: str, pid: int, seconds: float, clients: int, sample_s: float, seed: int = 0
) -> dict[str, Any]:
    """Drive the server at ``url`` (process ``pid``) for ``seconds`` with ``clients``
    closed-loop clients; the samples, the tallies and the server's own counts."""
    payloads = Payloads.make()
    tally = Tally()
    samples: list[dict[str, Any]] = []
    start_metrics = requests_by_outcome(httpx.get(url + "/metrics", trust_env=False).text)
    names = {str(p): _name(p) for p in _tree(pid)}
    t0 = time.monotonic()
    until = t0 + seconds
    threads: list[threading.Thread] = [
        threading.Thread(target=_client, args=(url, seed + i, until, payloads, tally))
        for i in range(clients)
    ]
    threads.append(threading.Thread(target=_sampler, args=(url, pid, until, sample_s, samples)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 300)
    elapsed = time.monotonic() - t0
    end_metrics = requests_by_outcome(httpx.get(url + "/metrics", trust_env=False).text)
    server = {k: end_metrics[k] - start_metrics.get(k, 0) for k in end_metrics}
    return {
        "seconds": round(elapsed, 1),
        "clients": clients,
        "seed": seed,
        "sent": dict(tally.sent),
        "as_expected": dict(tally.as_expected),
        "statuses": dict(sorted(tally.statuses.items())),
        "unexpected": tally.unexpected,
        "server_outcomes": {k: int(v) for k, v in server.items() if v},
        "expected_server_outcomes": _expected_outcomes(tally.sent),
        "good_per_s": round(
            (tally.as_expected["good_stream"] + tally.as_expected["good_plain"]) / elapsed, 2
        ),
        "processes": {names.get(k, "?"): k for k in names},
        "samples": samples,
    }


def _expected_outcomes(sent: Counter[str]) -> dict[str, int]:
    out: Counter[str] = Counter()
    for kind, n in sent.items():
        out[SERVER_OUTCOME[kind]] += n
    return dict(out)


def rss_trend(samples: list[dict[str, Any]], key: str, warmup_s: float) -> dict[str, float]:
    """RSS after warm-up: median of the first and the last third (MiB) and the least
    squares slope (MiB per minute)."""
    import numpy as np

    pts = [(s["t_s"], s[key]) for s in samples if s["t_s"] >= warmup_s]
    if len(pts) < 6:
        return {}
    t, v = np.array([p[0] for p in pts]), np.array([p[1] for p in pts])
    third = len(pts) // 3
    slope = float(np.polyfit(t, v, 1)[0]) * 60
    return {
        "first_third_median_mib": float(np.median(v[:third])),
        "last_third_median_mib": float(np.median(v[-third:])),
        "min_mib": float(v.min()),
        "max_mib": float(v.max()),
        "slope_mib_per_min": round(slope, 3),
    }


def log_problems(log: str) -> list[str]:
    """Lines of a server log that are not the start line, a refusal or the stop line."""
    allowed: tuple[Callable[[str], bool], ...] = (
        lambda ln: ln.startswith("kimi-bench serve: "),
        lambda ln: ln.startswith("WARNING:  refused a request from "),
        lambda ln: not ln.strip(),
    )
    return [ln for ln in log.splitlines() if not any(ok(ln) for ok in allowed)]


def host() -> dict[str, Any]:
    """The machine the soak ran on and how loaded it was at the end."""
    import platform

    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "loadavg_1_5_15": [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]],
    }
