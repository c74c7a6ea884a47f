"""The load generator's HTTP/1.1 on asyncio streams: requests whose bytes (head and body)
are built before the run and written with one call, a pool of keep-alive connections that
can be opened before the trace, response heads parsed by hand, bodies read as chunked or
``Content-Length`` bytes, and server-sent events split as the SSE format says.

Why not httpx here: its request path (client, pool, httpcore, anyio) costs milliseconds of
event-loop time per request on a loaded 2-core host; in a burst the later requests wait for
the earlier ones' share before their bytes leave, and that wait lands in their TTFTs
(issue 22: +270 ms over the server's own TTFT at 20 requests). httpx stays the library for
everything off the measured path (probes, ``/metrics``).

Not supported, as a benchmark's endpoint does not need them: proxies, redirects,
compressed bodies (requests ask for ``identity``), HTTP/2, ``100-continue``."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

HEAD_LIMIT = 1 << 20  # bytes of a response head, at most
_READ = 1 << 16


class WireError(Exception):
    """The connection broke or the peer did not speak HTTP/1.1."""


class ConnectFailed(WireError):
    """No connection could be made (refused, unreachable, connect timeout)."""


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int
    prefix: str  # the base URL's path, without a trailing slash

    @classmethod
    def from_url(cls, base_url: str) -> Origin:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def request_bytes(
    origin: Origin, method: str, path: str, body: bytes, headers: Mapping[str, str]
) -> bytes:
    """One HTTP/1.1 request, head and body, ready to write."""
    lines = [f"{method} {origin.prefix}{path} HTTP/1.1", f"Host: {origin.host_header}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines += ["Accept-Encoding: identity", f"Content-Length: {len(body)}", "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


class Response:
    """A response head and a reader for its body. ``received`` counts body bytes as they
    arrived (chunk framing excluded); ``complete`` is set once the whole body was read."""

    def __init__(
        self, reader: asyncio.StreamReader, status: int, reason: str, headers: dict[str, str]
    ) -> None:
        self._reader = reader
        self.status, self.reason, self.headers = status, reason, headers
        self.received = 0
        self.complete = False

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            if "chunked" in self.headers.get("transfer-encoding", "").lower():
                body = self._chunked()
            elif "content-length" in self.headers:
                body = self._sized(int(self.headers["content-length"]))
            else:
                body = self._until_close()
            async for data in body:
                self.received += len(data)
                yield data
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            raise WireError(f"the response body ended early: {type(exc).__name__}") from None
        except (ConnectionError, OSError) as exc:
            raise WireError(f"{type(exc).__name__}: {exc}") from None

    async def read(self) -> bytes:
        return b"".join([c async for c in self.chunks()])

    async def _chunked(self) -> AsyncIterator[bytes]:
        r = self._reader
        while True:
            size = int((await r.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                while await r.readuntil(b"\r\n") != b"\r\n":  # trailers
                    pass
                self.complete = True
                return
            data = await r.readexactly(size)
            await r.readexactly(2)
            yield data

    async def _sized(self, left: int) -> AsyncIterator[bytes]:
        while left > 0:
            data = await self._reader.read(min(left, _READ))
            if not data:
                raise asyncio.IncompleteReadError(b"", left)
            left -= len(data)
            yield data
        self.complete = True

    async def _until_close(self) -> AsyncIterator[bytes]:
        while data := await self._reader.read(_READ):
            yield data


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.pooled = False  # taken from the idle pool: the server may have closed it

    @classmethod
    async def open(cls, origin: Origin, timeout_s: float) -> Connection:
        tls = ssl.create_default_context() if origin.scheme == "https" else None
        try:
            async with asyncio.timeout(timeout_s):
                reader, writer = await asyncio.open_connection(
                    origin.host, origin.port, ssl=tls, limit=HEAD_LIMIT
                )
        except TimeoutError:
            raise ConnectFailed(f"connect timeout after {timeout_s:g} s") from None
        except OSError as exc:
            raise ConnectFailed(f"{type(exc).__name__}: {exc}") from None
        return cls(reader, writer)

    def usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    async def send(self, data: bytes) -> None:
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            raise WireError(f"{type(exc).__name__}: {exc}") from None

    async def response(self) -> Response:
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            raise WireError("the server closed the connection before answering") from None
        except asyncio.LimitOverrunError:
            raise WireError(f"response head longer than {HEAD_LIMIT} bytes") from None
        except (ConnectionError, OSError) as exc:
            raise WireError(f"{type(exc).__name__}: {exc}") from None
        status_line, *lines = head.decode("latin-1").split("\r\n")
        version, _, rest = status_line.partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise WireError(f"not an HTTP/1.1 response: {status_line[:80]!r}")
        headers: dict[str, str] = {}
        for line in lines:
            if line:
                key, _, value = line.partition(":")
                headers[key.strip().lower()] = value.strip()
        return Response(self.reader, int(code), reason, headers)

    def close(self) -> None:
        self.writer.close()


class Pool:
    """Idle keep-alive connections to one origin; a connection goes back only after a
    complete response that did not ask to close it."""

    def __init__(self, origin: Origin, connect_timeout_s: float) -> None:
        self.origin, self.connect_timeout_s = origin, connect_timeout_s
        self.idle: list[Connection] = []

    async def acquire(self, fresh: bool = False) -> Connection:
        while self.idle and not fresh:
            conn = self.idle.pop()
            if conn.usable():
                conn.pooled = True
                return conn
            conn.close()
        return await Connection.open(self.origin, self.connect_timeout_s)

    def release(self, conn: Connection, response: Response | None) -> None:
        keep = (
            response is not None
            and response.complete
            and response.headers.get("connection", "").lower() != "close"
            and conn.usable()
        )
        if keep:
            conn.pooled = False
            self.idle.append(conn)
        else:
            conn.close()

    async def preopen(self, n: int) -> None:
        """``n`` connections opened now (failures are left to the requests to report)."""
        opened = await asyncio.gather(
            *(Connection.open(self.origin, self.connect_timeout_s) for _ in range(n)),
            return_exceptions=True,
        )
        self.idle += [c for c in opened if isinstance(c, Connection)]

    async def aclose(self) -> None:
        conns, self.idle = self.idle, []
        for conn in conns:
            conn.close()
        for conn in conns:
            with contextlib.suppress(Exception):
                await conn.writer.wait_closed()


async def sse_events(
    chunks: AsyncIterator[bytes], clock: Callable[[], float]
) -> AsyncGenerator[tuple[str, str, float], None]:
    """(event name, data, arrival time) per dispatched event of a ``text/event-stream``
    body, as the SSE format splits it: ``data:`` lines joined by newlines, ``event:`` names
    it, comment lines and unknown fields skipped, a blank line dispatches. The arrival time
    is ``clock()`` when the chunk that completed the event came in."""
    buf = b""
    event, data = "", list[str]()
    async for chunk in chunks:
        now = clock()
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", "replace")
            if not line:
                if data:
                    yield event, "\n".join(data), now
                event, data = "", []
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data.append(value)
            elif field == "event":
                event = value
