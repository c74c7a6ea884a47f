"""The arms of ``serve-ab`` through HTTP: each one external endpoint or one ``kimi-bench
serve`` emulator server started on loopback (its options model written whole to a file and
handed over), waited for (a port another process took first: started again on another),
probed once (``/v1/models``, version, the prompt's text-only token count) and stopped at
the end with whatever segments its pipeline left."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kimi_bench.bench.serve_runs import ServeFailed, ServeRun
from kimi_bench.options import SERVE_FROM_OPTIONS, ServeCommandOptions
from kimi_bench.pipeline.transport import cleanup_segments
from kimi_bench.serving.client import auth_headers, probe_server
from kimi_bench.serving.endpoints import text_only_prompt_tokens
from kimi_bench.serving.eos import eos_spelling
from kimi_bench.serving.launch import ServerProcess, ServerStartError, free_port, port_was_taken
from kimi_bench.serving.trace import DEFAULT_PROMPT


class ArmSettings(Protocol):
    """What opening the arms reads of ``serve_http.ArmSettings``."""

    @property
    def endpoints(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def arms(self) -> tuple[str, ...]: ...
    @property
    def emulator(self) -> ServeCommandOptions | None: ...
    @property
    def log_dir(self) -> Path | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def api_key_env(self) -> str: ...
    @property
    def request_timeout_s(self) -> float: ...
    @property
    def ignore_eos(self) -> bool: ...


@dataclass
class Arm:
    """One arm of serve-ab through HTTP: its endpoint (or emulator server) and its runs."""

    name: str
    url: str
    source: dict[str, Any]
    model: str = ""
    server: ServerProcess | None = None
    dead: str | None = None
    runs: list[ServeRun] = field(default_factory=list)

    def gone(self) -> str | None:
        """Why the arm's emulator server is gone (None while it runs, or for an endpoint)."""
        if self.server is None or self.server.proc is None or self.server.proc.poll() is None:
            return None
        tail = self.server.log.read_text(errors="replace").strip().splitlines()[-2:]
        return (
            f"the emulator server exited with code {self.server.proc.returncode}"
            f" ({' | '.join(tail) or 'empty log'})"
        )


def open_arms(opts: ArmSettings, stack: contextlib.ExitStack) -> list[Arm]:
    """Start the emulator servers (side by side) or take the endpoints; probe each."""
    if opts.endpoints:
        arms = [Arm(n, u.rstrip("/"), {"kind": "external", "url": u}) for n, u in opts.endpoints]
    else:
        logs = opts.log_dir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        logs.mkdir(parents=True, exist_ok=True)
        arms = [_spawn_emulator(name, opts, logs, stack) for name in opts.arms]
        arms = [_ready(arm, opts, logs, stack) for arm in arms]
    unreachable = []
    for arm in arms:
        info = probe_server(arm.url, api_key_env=opts.api_key_env)
        model = opts.model or info.model
        arm.source.update(
            model=model,
            server_version=info.version,
            version_source=info.version_source,
            server_header=info.server_header,
            probe_error=info.error,
        )
        if info.error and info.error.startswith("cannot reach"):
            unreachable.append(f"arm {arm.name}: {info.error}")
            # one of several endpoints: its requests fail (connect) and end the arm as
            # dead, so the report counts them; the other arms are measured
            arm.model = model or "unknown"
            continue
        if not model:
            raise ServeFailed(
                f"arm {arm.name}: {arm.url}/v1/models lists no model"
                + (f" ({info.error})" if info.error else "")
                + "; name one with --model",
                [],
            )
        arm.model = model
        if opts.ignore_eos:  # how this server takes --ignore-eos
            arm.source["ignore_eos_as"] = eos_spelling(arm.url, auth_headers(opts.api_key_env))
        arm.source["text_only_prompt_tokens"] = text_only_prompt_tokens(  # one request:
            arm.url, model, DEFAULT_PROMPT, api_key_env=opts.api_key_env,  # its deadline
            timeout_s=min(opts.request_timeout_s, 60.0),
        )  # fmt: skip
    if len(unreachable) == len(arms):  # nothing to measure: a typo, a server not up yet
        raise ServeFailed("; ".join(unreachable), [])
    return arms


def emulator_command(arm: str, port: int, opts: ArmSettings, folder: Path) -> list[str]:
    """The ``kimi-bench serve`` of one emulated arm: its options model written whole to
    ``folder/serve-<arm>.json`` and handed to the server process as that file."""
    assert opts.emulator is not None, "endpoints are not emulated"
    update: dict[str, object] = {"arm": arm, "port": port}
    if opts.emulator.profile is not None:  # each arm's traces in a folder of its own
        update["profile"] = opts.emulator.profile / arm
    model = opts.emulator.model_copy(update=update)
    path = folder / f"serve-{arm}.json"
    path.write_text(model.model_dump_json())
    return [sys.executable, "-m", "kimi_bench.cli.main", SERVE_FROM_OPTIONS, str(path)]


def _spawn_emulator(name: str, opts: ArmSettings, logs: Path, stack: contextlib.ExitStack) -> Arm:
    assert opts.emulator is not None, "endpoints are not emulated"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = emulator_command(name, port, opts, logs)
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # this checkout's package, in the child
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    server = ServerProcess(
        argv,
        url,
        logs / f"server-{name}.log",
        start_timeout_s=opts.emulator.start_timeout,
        stop_timeout_s=40.0,
        env=env,
    )
    knobs = ("ranks", "processor_workers", "transport", "runtime", "device")
    emulator = {"arm": name, **{k: getattr(opts.emulator, k) for k in knobs}}
    emulator["log"] = str(server.log)
    arm = Arm(name, url, {"kind": "emulated", "url": url, "emulator": emulator}, server=server)
    stack.callback(_stop_emulator, arm)
    server.spawn()
    return arm


def _ready(arm: Arm, opts: ArmSettings, logs: Path, stack: contextlib.ExitStack) -> Arm:
    """Wait for an emulator; one whose port another process took first starts again on
    another port (up to three tries)."""
    for tries_left in (2, 1, 0):
        assert arm.server is not None
        try:
            arm.server.wait_ready()
            return arm
        except ServerStartError as exc:
            if not (port_was_taken(exc) and tries_left):
                msg = f"the emulator server of arm {arm.name} did not start: {exc}"
                raise ServeFailed(msg, []) from None
        arm = _spawn_emulator(arm.name, opts, logs, stack)
    raise AssertionError("unreachable")


def _stop_emulator(arm: Arm) -> None:
    """Stop the server; remove any segment its pipeline left (its own prefix only)."""
    assert arm.server is not None
    code = arm.server.stop()
    pid = arm.server.proc.pid if arm.server.proc else None
    left = cleanup_segments(f"kimibench_{pid}_") if pid else []
    arm.source["exit_code"] = code
    for run in arm.runs:
        run.leftover_segments = len(left)
