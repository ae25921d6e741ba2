"""A small HTTP proxy in front of the real S3 server that injects the faults a real server won't show.

Faults are queued per HTTP method and consumed in order: `throttle` answers 503 SlowDown, `error`
answers 500 InternalError, `reset` reads half of the request body and then resets the connection
(TCP RST), `delay` forwards after a pause. Every request that reaches the proxy is logged with the
time it arrived and the time its response was sent, so tests can check ordering.
"""

from __future__ import annotations

import http.client
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import unquote, urlsplit

FaultKind = Literal["throttle", "error", "reset"]
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}
ERROR_BODIES = {
    "throttle": (503, "SlowDown", "Please reduce your request rate."),
    "error": (500, "InternalError", "We encountered an internal error. Please try again."),
}


@dataclass
class LoggedRequest:
    method: str
    key: str  # path without the bucket, URL-decoded
    arrived: float
    answered: float = 0.0
    fault: str | None = None


class FaultProxy:
    def __init__(self, upstream_url: str, delay_seconds: float = 0.0) -> None:
        upstream = urlsplit(upstream_url)
        self.upstream_host = upstream.hostname or "127.0.0.1"
        self.upstream_port = upstream.port or 80
        self.delay_seconds = delay_seconds
        self.faults: dict[str, deque[tuple[FaultKind, str]]] = {}
        self.log: list[LoggedRequest] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def inject(self, method: str, kind: FaultKind, key_contains: str = "") -> None:
        """Fail the next `method` request whose key contains `key_contains` with `kind`, once."""
        with self.lock:
            self.faults.setdefault(method, deque()).append((kind, key_contains))

    def pending_faults(self) -> int:
        with self.lock:
            return sum(len(queue) for queue in self.faults.values())

    def requests(self, method: str) -> list[LoggedRequest]:
        with self.lock:
            return [entry for entry in self.log if entry.method == method]

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _take_fault(self, method: str, key: str) -> FaultKind | None:
        with self.lock:
            queue = self.faults.get(method)
            if not queue:
                return None
            for index, (kind, key_contains) in enumerate(queue):
                if key_contains in key:
                    del queue[index]
                    return kind
            return None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
                return

            def handle_any(self) -> None:
                path = urlsplit(self.path).path
                key = unquote(path.split("/", 2)[2]) if path.count("/") >= 2 else ""
                entry = LoggedRequest(self.command, key, time.monotonic())
                with proxy.lock:
                    proxy.log.append(entry)
                length = int(self.headers.get("Content-Length") or 0)
                fault = proxy._take_fault(self.command, key)
                entry.fault = fault
                if fault == "reset":
                    self.rfile.read(length // 2)
                    # SO_LINGER 0: close() sends RST instead of FIN, like a dropped connection.
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return
                body = self.rfile.read(length) if length else b""
                if fault is not None:
                    status, code, message = ERROR_BODIES[fault]
                    self.reply(status, {"Content-Type": "application/xml"}, error_xml(code, message))
                else:
                    if proxy.delay_seconds:
                        time.sleep(proxy.delay_seconds)
                    status, headers, payload = self.forward(body)
                    self.reply(status, headers, payload)
                entry.answered = time.monotonic()

            def forward(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
                connection = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                    connection.request(self.command, self.path, body=body or None, headers=headers)
                    response = connection.getresponse()
                    payload = response.read()
                    # A HEAD response keeps the object's Content-Length; otherwise reply() sets it.
                    dropped = HOP_BY_HOP if self.command == "HEAD" else HOP_BY_HOP | {"content-length"}
                    response_headers = {k: v for k, v in response.getheaders() if k.lower() not in dropped}
                    return response.status, response_headers, payload
                finally:
                    connection.close()

            def reply(self, status: int, headers: dict[str, str], payload: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                if "content-length" not in {name.lower() for name in headers}:
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

        return Handler


def error_xml(code: str, message: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
        "<RequestId>fault-proxy</RequestId></Error>"
    ).encode()
