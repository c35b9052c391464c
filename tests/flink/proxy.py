"""A recording loopback HTTP proxy in front of the Flink REST API: proves on the wire what a client sent.

The agent (or a scaler in-process) is pointed at the proxy's URL; every request is forwarded to the
real JobManager unchanged and logged as (method, path, status). Lives in tests/ only.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class RecordingProxy:
    """Forwards every request to ``upstream`` and records it."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.log: list[tuple[str, str, int]] = []
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def methods(self) -> list[str]:
        """Methods of every request so far, in order."""
        with self.lock:
            return [method for method, _, _ in self.log]

    def writes(self) -> list[tuple[str, str, int]]:
        """Every request that was not a GET."""
        with self.lock:
            return [entry for entry in self.log if entry[0] != "GET"]

    def start(self) -> RecordingProxy:
        """Serve on a free loopback port."""
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                request = urllib.request.Request(
                    proxy.upstream + self.path,
                    data=body,
                    method=self.command,
                    headers={k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")},
                )
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        status, payload, ctype = response.status, response.read(), response.headers.get("Content-Type")
                except urllib.error.HTTPError as exc:
                    status, payload, ctype = exc.code, exc.read(), exc.headers.get("Content-Type")
                except (urllib.error.URLError, OSError) as exc:
                    status, payload, ctype = 502, f'{{"errors": ["proxy: {exc}"]}}'.encode(), "application/json"
                with proxy.lock:
                    proxy.log.append((self.command, self.path, status))
                self.send_response(status)
                self.send_header("Content-Type", ctype or "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PUT = do_PATCH = do_POST = do_DELETE = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        server = self._server
        threading.Thread(
            target=lambda: server.serve_forever(poll_interval=0.05), daemon=True, name="flink-proxy"
        ).start()
        return self

    @property
    def url(self) -> str:
        """Base URL to give the client instead of the JobManager's."""
        assert self._server is not None
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
