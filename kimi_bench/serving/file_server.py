"""A loopback file server for ``--image-transport url``: the run's request images served
from memory at ``http://127.0.0.1:PORT/images/<k>.<ext>`` for as long as the run lasts
(a context manager: started before the first arm, stopped after the last). Only the pool's
own paths answer (404 otherwise); nothing is read from disk."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EXTENSIONS = {"image/jpeg": "jpg", "image/png": "png", "image/webp": "webp"}


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        found = self.server.files.get(self.path)
        if found is None:
            self.send_error(404)
            return
        data, mime = found
        self.send_response(200)
        self.send_header("Content-Type", mime)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.server.served += 1

    def log_message(self, format: str, *args: object) -> None:
        pass  # no console line per image


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    files: dict[str, tuple[bytes, str]]
    served: int = 0


@contextlib.contextmanager
def serve_images(images: Sequence[bytes], mimes: Sequence[str]) -> Iterator[tuple[str, ...]]:
    """Serve ``images`` on loopback; yields each image's URL (in order)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    paths = [f"/images/{k}.{EXTENSIONS[m]}" for k, m in enumerate(mimes)]
    server.files = {p: (data, m) for p, data, m in zip(paths, images, mimes, strict=True)}
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="image-files", daemon=True)
    thread.start()
    try:
        yield tuple(f"http://127.0.0.1:{port}{p}" for p in paths)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
