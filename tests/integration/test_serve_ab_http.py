"""serve-ab through HTTP: one ``kimi-bench serve`` measured as two endpoints (the A/B of a
server with itself), one emulator server per arm started and stopped without endpoints, a
dead endpoint, an unreachable one, and Ctrl-C. Every test checks that the processes and
shared-memory segments it caused are gone."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import statistics
import sys
import threading
import uuid
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from kimi_bench import __version__
from kimi_bench.bench import serve_arms
from kimi_bench.bench.serve import ServeFailed
from kimi_bench.bench.serve_http import HttpServeOptions, run_serve_ab_http
from kimi_bench.infra.stats import Measurement
from kimi_bench.infra.stats.compare import SIGNIFICANT, STRADDLES_ZERO, compare
from kimi_bench.options import ServeOptions
from kimi_bench.pipeline.transport import list_segments
from kimi_bench.serving.client import INTERRUPTED
from kimi_bench.serving.launch import ServerProcess, free_port
from tests.faults import DieAtRequest, importable_env, spec
from tests.integration.test_http_emulator import MARK, marked_processes

OK = 'kimi_bench_requests_total{outcome="ok"}'


def gone(mark: str, limit_s: float = 15.0) -> list[int]:
    """The marked processes still alive after up to ``limit_s`` (they exit on their own
    once stopped; a loaded machine may take a few seconds)."""
    import time

    deadline = time.monotonic() + limit_s
    while (left := marked_processes(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def options(log_dir: Path | None = None, **kw: Any) -> HttpServeOptions:
    """serve-ab's options (``kw``; ``endpoints`` as (name, URL) pairs) as the command makes
    them into the HTTP run's settings."""
    if "endpoints" in kw:
        kw["endpoints"] = [f"{name}={url}" for name, url in kw["endpoints"]]
    base: dict[str, Any] = {
        "rates": (math.inf,),
        "requests": 6,
        "resolution": (160, 120),
        "warmup_requests": 1,
        "ranks": 2,
        "processor_workers": 1,
        "device": "cpu",
        "request_timeout_s": 60.0,
    }
    opts = ServeOptions(**{**base, **kw})
    return HttpServeOptions.from_options(opts, log_dir=log_dir, before_send=None)


def serve_process(tmp_path: Path, name: str, mark: str, *extra: str) -> ServerProcess:
    port = free_port()
    argv = [sys.executable, "-m", "kimi_bench.cli.main", "serve", "--port", str(port)]
    argv += ["--ranks", "2", "--processor-workers", "1", "--device", "cpu", *extra]
    env = importable_env({**os.environ, MARK: mark})  # --fault-hooks names tests.faults
    return ServerProcess(
        argv, f"http://127.0.0.1:{port}", tmp_path / f"{name}.log", start_timeout_s=300, env=env
    )


def ttft(runs: list[dict[str, Any]], arm: str) -> Measurement:
    """TTFT of an arm's measured requests; the unit is the repeat (one trace window):
    requests of one window share the machine's load at that time, so they are not
    independent of each other, while windows are (and alternate between the arms)."""
    pairs = [(r.ttft_ms, run.repeat) for run in runs if run.arm == arm
             for r in run.records if r.error is None]  # fmt: skip
    return Measurement([p[0] for p in pairs], "ms", arm, [p[1] for p in pairs])


@pytest.mark.slow
def test_one_server_as_two_endpoints_alternates_and_compares_whole_windows(
    tmp_path: Path,
) -> None:
    mark = uuid.uuid4().hex
    server = serve_process(tmp_path, "deferred", mark, "--arm", "deferred")
    with server:
        assert server.proc is not None
        pid = server.proc.pid
        url = server.base_url
        opts = options(endpoints=(("a", url), ("b", url)), rates=(4.0,), requests=6, repeats=6)
        runs = run_serve_ab_http(opts)
    # A B, B A, A B, ...: the order of the arms alternates between repeats
    assert [r.arm for r in runs] == ["a", "b", "b", "a"] * 3
    for run in runs:
        assert run.error is None and run.source is not None
        assert run.source["kind"] == "external"
        assert len(run.records) == 6 and all(r.error is None for r in run.records)
        src = run.source
        assert src["model"] == "kimi-bench-emulator" and src["server_version"] == __version__
        assert src["version_source"] == "GET /version" and src["url"] == url
        assert run.server_metrics is not None
        assert run.server_metrics["counters"][OK] == 6  # the warm-up request came before
        assert run.copies is None  # an external server's ledger is not ours to read
    a, b = ttft(runs, "a"), ttft(runs, "b")
    assert a.n_units == b.n_units == 6
    # One server behind both names: how large the delta comes out is the host's noise (a
    # loaded 2-core CI host gave +27% once), so nothing here bounds it. What must hold is
    # that the comparison is made of whole windows and says what the records say.
    cmp = compare(a, b, confidence=0.99)
    assert cmp.a_units == cmp.b_units == 6
    assert cmp.a_value == pytest.approx(statistics.median(a.samples))
    assert cmp.b_value == pytest.approx(statistics.median(b.samples))
    assert cmp.delta_pct == pytest.approx((cmp.b_value - cmp.a_value) / cmp.a_value * 100)
    assert cmp.verdict in (SIGNIFICANT, STRADDLES_ZERO)
    assert cmp.test.n_x == cmp.test.n_y == 6  # the rank test is on windows, not requests
    assert gone(mark) == [] and list_segments(f"kimibench_{pid}_") == []


class _Recorded(ServerProcess):
    started: ClassVar[list[ServerProcess]] = []

    def spawn(self) -> ServerProcess:
        _Recorded.started.append(self)
        return super().spawn()


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[ServerProcess]:
    """The emulator servers serve-ab starts, and a mark in their environment."""
    _Recorded.started = []
    monkeypatch.setattr(serve_arms, "ServerProcess", _Recorded)
    monkeypatch.setenv(MARK, uuid.uuid4().hex)
    return _Recorded.started


def _all_gone(servers: list[ServerProcess]) -> None:
    for s in servers:
        assert s.proc is not None and s.proc.poll() is not None
        assert list_segments(f"kimibench_{s.proc.pid}_") == []
    assert gone(os.environ[MARK]) == []


def copied(run: Any) -> int:
    return sum(r["bytes"] for r in run.copies if r["copies"])


@pytest.mark.slow
def test_without_endpoints_each_arm_gets_an_emulator_server_that_is_stopped(
    tmp_path: Path, recorded: list[ServerProcess]
) -> None:
    runs = run_serve_ab_http(options(arms=("eager", "deferred"), log_dir=tmp_path))
    assert [r.arm for r in runs] == ["eager", "deferred"]
    for run in runs:
        assert run.error is None and run.leftover_segments == 0
        src = run.source
        assert src is not None and run.server_metrics is not None
        assert src["kind"] == "emulated" and src["emulator"]["arm"] == run.arm
        assert src["exit_code"] == 0 and src["model"] == "kimi-bench-emulator"
        assert run.server_metrics["counters"][OK] == 6
        for r in run.records:
            assert r.error is None and r.status == 200 and r.ttft_ms is not None
            bounds = [r.t_sent, *(r.bounds[k] for k in ("t_start", "t_produced", "t_recv",
                                                        "t_step"))]  # fmt: skip
            assert r.t_first is not None and bounds == sorted(bounds) and bounds[-1] <= r.t_first
            assert r.stages_ms is not None
            assert abs(sum(r.stages_ms.values()) - r.ttft_ms) < 1e-6 * r.ttft_ms + 1e-6
            assert r.facts["image_tokens"] > 0 and r.facts["batch"] > 0
            assert r.images.count == 1 and r.images.pixels == 160 * 120
    eager, deferred = runs
    assert copied(deferred) < copied(eager)  # the point of deferral, from the servers' ledgers
    assert len(recorded) == 2
    _all_gone(recorded)


@pytest.mark.slow
def test_a_dead_endpoint_ends_its_arm_with_a_message_and_the_partial_runs(
    tmp_path: Path,
) -> None:
    mark = uuid.uuid4().hex
    good = serve_process(tmp_path, "good", mark, "--arm", "deferred")
    # request ids count from the server's start-up request: 1 is the warm-up, 2 and 3 the
    # first two of the trace; the producer crashes on 4 and the server stops by itself
    fault = spec(DieAtRequest, rid=4)
    bad = serve_process(tmp_path, "bad", mark, "--arm", "deferred", "--fault-hooks", fault)
    with contextlib.ExitStack() as stack:
        for s in (good, bad):  # both start side by side
            stack.callback(s.stop)
            s.spawn()
        for s in (good, bad):
            s.wait_ready()
        opts = options(endpoints=(("a", good.base_url), ("b", bad.base_url)), rates=(4.0, math.inf))
        with pytest.raises(ServeFailed) as info:
            run_serve_ab_http(opts)
        bad_code = bad.proc.wait(60) if bad.proc else None
    message, runs = str(info.value), info.value.runs
    assert message.startswith(f"b: endpoint {bad.base_url} looks dead"), message
    assert message.endswith("results are partial")
    a_runs = [r for r in runs if r.arm == "a"]
    b_runs = [r for r in runs if r.arm == "b"]
    assert len(a_runs) == 2 and all(r.error is None for r in a_runs)
    assert all(len(r.records) == 6 and r.records[0].error is None for r in a_runs)
    first = b_runs[0].records
    # rid 2 is served; rid 3 may still be in the pipeline when its producer dies on rid 4,
    # and then fails with the rest (503: the emulated pipeline failed)
    assert first[0].error is None, [r.error for r in first]
    assert any(r.error is not None for r in first), "the crash failed no request"
    for r in (r for run in b_runs for r in run.records[1:] if r.error is not None):
        assert r.error_kind in ("http", "connect", "read", "cancelled"), r
        assert r.error
    assert "looks dead" in (b_runs[-1].error or "")
    assert bad_code == 1
    assert "producer0 died with exit code 3" in " ".join(bad.log.read_text().split())
    assert gone(mark) == []


def test_an_unreachable_endpoint_fails_before_any_run() -> None:
    a, b = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServeFailed) as info:
        run_serve_ab_http(options(endpoints=(("a", a), ("b", b))))
    assert str(info.value).startswith(f"arm a: cannot reach {a}")
    assert info.value.runs == []


@pytest.mark.slow
def test_ctrl_c_stops_the_servers_it_started(
    recorded: list[ServerProcess], sigint_default: None
) -> None:
    timers: list[threading.Timer] = []

    def on_run(runs: list[dict[str, Any]]) -> None:  # Ctrl-C during the slow rate's trace
        if len(runs) == 2 and not timers:
            timers.append(threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT)))
            timers[0].start()

    opts = options(arms=("eager", "deferred"), rates=(math.inf, 0.5), requests=10)
    try:
        with pytest.raises(ServeFailed) as info:
            run_serve_ab_http(opts, on_run=on_run)
    finally:
        for t in timers:
            t.cancel()
    assert str(info.value) == INTERRUPTED
    runs = info.value.runs
    assert [r.rate_label for r in runs][:2] == ["inf", "inf"]
    assert runs[-1].error == INTERRUPTED and runs[-1].rate_label == "0.5"
    assert len(recorded) == 2
    _all_gone(recorded)


@pytest.mark.slow
def test_serve_ab_command_against_one_emulator_as_two_endpoints_draws_every_figure(
    tmp_path: Path,
) -> None:
    """The user's path of issue 19: ``kimi-bench serve-ab --endpoint a=URL --endpoint b=URL``
    against a healthy ``kimi-bench serve`` (stage data present, names not eager/deferred)."""
    import json
    import subprocess

    mark = uuid.uuid4().hex
    server = serve_process(tmp_path, "deferred", mark, "--arm", "deferred")
    out = tmp_path / "out"
    with server:
        url = server.base_url
        argv = [sys.executable, "-m", "kimi_bench.cli.main", "serve-ab", "--endpoint",
                f"a={url}", "--endpoint", f"b={url}/v1", "--num-prompts", "6",
                "--image-resolution", "240x320", "--warmup-requests", "1",
                "--output-dir", str(out)]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in text, text
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["arms"] == ["a", "b"] == report["config"]["arms"]
    assert (
        report["summary"]["verdict"].startswith("rate ")
        and " vs a " in report["summary"]["verdict"]
    )
    assert report["summary"]["failed_requests"] == 0
    pngs = {p.name for p in out.glob("*.png") if p.stat().st_size > 1000}
    assert pngs == {"ttft_vs_rate.png", "throughput.png", "ttft_cdf.png", "stage_waterfall.png"}
    for r in report["requests"]:  # the emulator's stages and batches come through
        assert r["queue_wait_ms"] is not None and r["batch_id"] is not None
    assert gone(mark) == []


def test_the_text_only_probe_keeps_the_request_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one plain request that learns a server's text-only prompt tokens has the run's
    --request-timeout (it once waited 60 s on each stalling endpoint: 2 minutes of a run
    with --request-timeout 2 against three such servers)."""
    from kimi_bench.serving.records import ServerInfo

    asked: list[float] = []
    one_model = [{"id": "m"}]
    monkeypatch.setattr(serve_arms, "probe_server",
                        lambda url, **_: ServerInfo(base_url=url, models=one_model))  # fmt: skip
    monkeypatch.setattr(serve_arms, "text_only_prompt_tokens",
                        lambda *a, timeout_s, **k: asked.append(timeout_s))  # fmt: skip
    for given, used in ((2.5, 2.5), (600.0, 60.0)):
        opts = options(endpoints=(("a", "http://127.0.0.1:9"),), request_timeout_s=given)
        with contextlib.ExitStack() as stack:
            serve_arms.open_arms(opts, stack)
        assert asked.pop() == used


@pytest.mark.slow
def test_an_emulator_whose_port_was_taken_starts_again_on_another(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """serve-ab chooses its emulators' ports a moment before they bind them; a port that
    another process on the host took meanwhile (seen once in 20 rounds of the Ctrl-C tests:
    'the emulator server of arm eager did not start ... Address already in use') is chosen
    again, not the end of the run. Here the first port handed out is held by this test."""
    from kimi_bench.serving.launch import ServerStartError, bind_socket, port_was_taken

    held = bind_socket("127.0.0.1", 0)
    taken = held.getsockname()[1]
    ports = iter([taken])
    monkeypatch.setattr(serve_arms, "free_port", lambda: next(ports, None) or free_port())
    with pytest.raises(ServerStartError) as info:
        bind_socket("127.0.0.1", taken)
    assert port_was_taken(info.value)
    assert not port_was_taken(ServerStartError("the server process exited with code 1"))
    try:
        with contextlib.ExitStack() as stack:
            arms = serve_arms.open_arms(options(log_dir=tmp_path), stack)
            for arm in arms:  # the first one was handed the held port
                assert arm.url != f"http://127.0.0.1:{taken}"
                assert httpx.get(arm.url + "/health", trust_env=False).status_code == 200
            assert [a.name for a in arms] == ["eager", "deferred"]
    finally:
        held.close()
