"""``--profile-server``: a third-party server's own profiler around each measured trace,
started and stopped through its HTTP endpoints as the servers' own benchmark clients do
(SGLang: ``POST /start_profile`` and ``/stop_profile``; vLLM started with a profiler dir:
the same paths). A server without them answers 404 (or not at all): that is a warning in
the report, never a failed run."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from kimi_bench.serving.client import auth_headers

START, STOP = "/start_profile", "/stop_profile"
TIMEOUT_S = 60.0  # a server writes its trace on stop; that may take a while


@dataclass
class ServerProfiler:
    """One trace's profile on one endpoint: what each call answered."""

    url: str
    api_key_env: str
    answers: dict[str, str] = field(default_factory=dict)

    def _call(self, path: str) -> None:
        try:
            r = httpx.post(self.url.rstrip("/") + path, timeout=TIMEOUT_S, trust_env=False,
                           headers=auth_headers(self.api_key_env))  # fmt: skip
            self.answers[path] = "ok" if r.is_success else f"HTTP {r.status_code}"
        except httpx.HTTPError as exc:
            self.answers[path] = f"{type(exc).__name__}: {exc}"

    def start(self) -> None:
        self._call(START)

    def stop(self) -> None:
        if self.answers.get(START) == "ok":
            self._call(STOP)

    @property
    def ok(self) -> bool:
        return self.answers.get(START) == "ok" and self.answers.get(STOP) == "ok"

    def outcome(self) -> dict[str, str | bool | None]:
        """What the report keeps (``config.arm_sources.<arm>.profile_server``)."""
        return {"ok": self.ok, "warning": self.warning(), **self.answers}

    def warning(self) -> str | None:
        if self.ok:
            return None
        why = self.answers.get(START, "not called")
        return (
            f"WARNING: --profile-server: {self.url}{START} answered {why}: the server has no "
            "profiler endpoints (SGLang serves them; vLLM only when started with a profiler "
            "directory), so no server trace was taken"
        )
