"""A small fault-injecting HTTP proxy, for the faults a real server will not produce on demand.

It forwards every request to a real upstream (the test Redmine) unless its ``decide`` function picks a
fault for it: 5xx, 429 with ``Retry-After``, a stall longer than the client's read timeout, a connection
reset before any response, a response cut off halfway, or one rewritten (a body no Redmine sends).
Decisions get the method, the path with its query, and how many times that exact request was seen
before, so rules can be deterministic even when requests arrive from several threads in any order.

    with FaultProxy(redmine_url, decide=fail_fraction(0.2)) as proxy:
        pull(proxy.url, ...)
        proxy.faults_injected  # how many requests were sabotaged
"""

from __future__ import annotations

import hashlib
import http.client
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable
from enum import Enum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "upgrade"}


class Fault(Enum):
    NONE = "none"
    HTTP_500 = "500"
    HTTP_503 = "503"
    TOO_MANY_REQUESTS = "429"
    STALL = "stall"  # no answer until long after the client's read timeout
    RESET = "reset"  # TCP RST instead of a response
    TRUNCATE = "truncate"  # status and headers, then half the body, then RST
    SLOW = "slow"  # forwarded, but only after `slow_s` (to let a test kill the client mid-run)
    REDIRECT = "redirect"  # 302 to `redirect(path)` (another host, or another path of this proxy)
    REWRITE = "rewrite"  # forwarded, and the response changed by `rewrite` on its way back


Decide = Callable[[str, str, int], Fault]  # (method, path?query, times seen before) -> fault
Reply = tuple[int, list[tuple[str, str]], bytes]  # status, headers, body
Rewrite = Callable[[Reply], Reply]


def no_faults(method: str, path: str, seen: int) -> Fault:
    return Fault.NONE


FAILURES = tuple(f for f in Fault if f not in (Fault.NONE, Fault.SLOW, Fault.REDIRECT, Fault.REWRITE))


def fail_fraction(fraction: float, faults: tuple[Fault, ...] = FAILURES) -> Decide:
    """Sabotage about ``fraction`` of all requests, choosing the fault by a hash of (request, attempt)."""

    def decide(method: str, path: str, seen: int) -> Fault:
        digest = hashlib.sha256(f"{method} {path} {seen}".encode()).digest()
        if digest[0] / 256 >= fraction:
            return Fault.NONE
        return faults[digest[1] % len(faults)]

    return decide


def on_path(fault: Fault, contains: str, first_attempts: int | None = None) -> Decide:
    """``fault`` for requests whose path contains ``contains``: always, or only its first N attempts."""

    def decide(method: str, path: str, seen: int) -> Fault:
        if contains in path and (first_attempts is None or seen < first_attempts):
            return fault
        return Fault.NONE

    return decide


class BackgroundServer:
    """An HTTP server on 127.0.0.1 (a free port) serving from a thread while in its ``with`` block."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], name: str) -> None:
        self.stopping = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, name=name, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class FaultProxy(BackgroundServer):
    def __init__(
        self,
        upstream: str,
        decide: Decide = no_faults,
        stall_s: float = 3.0,
        slow_s: float = 0.3,
        retry_after: str = "1",
        redirect: Callable[[str], str] | None = None,
        rewrite: Rewrite | None = None,
    ) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.decide = decide
        self.stall_s = stall_s
        self.slow_s = slow_s
        self.retry_after = retry_after
        self.redirect = redirect
        self.rewrite = rewrite
        self.seen: Counter[str] = Counter()
        self.faults: Counter[Fault] = Counter()
        self.lock = threading.Lock()
        super().__init__(self._handler_class(), "faultproxy")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def faults_injected(self) -> int:
        return sum(n for fault, n in self.faults.items() if fault in FAILURES)

    def choose(self, method: str, path: str) -> Fault:
        with self.lock:
            key = f"{method} {path}"
            seen = self.seen[key]
            self.seen[key] += 1
            fault = self.decide(method, path, seen)
            self.faults[fault] += 1
            return fault

    def forward(self, method: str, path: str, headers: dict[str, str], body: bytes | None) -> Reply:
        connection = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=60)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            kept_headers = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
            return response.status, kept_headers, response.read()
        finally:
            connection.close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: object) -> None:  # keep test output clean
                pass

            def reset(self) -> None:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
                self.close_connection = True

            def reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers:
                    if name.lower() != "content-length":
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def handle_any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                fault = proxy.choose(self.command, self.path)
                if fault is Fault.RESET:
                    return self.reset()
                if fault is Fault.STALL:
                    proxy.stopping.wait(proxy.stall_s)
                    return self.reset()
                if fault in (Fault.HTTP_500, Fault.HTTP_503):
                    return self.reply(int(fault.value), [("Content-Type", "text/plain")], b"injected failure")
                if fault is Fault.TOO_MANY_REQUESTS:
                    headers = [("Content-Type", "text/plain"), ("Retry-After", proxy.retry_after)]
                    return self.reply(429, headers, b"slow down")
                if fault is Fault.REDIRECT and proxy.redirect is not None:
                    return self.reply(302, [("Location", proxy.redirect(self.path))], b"")
                if fault is Fault.SLOW:
                    proxy.stopping.wait(proxy.slow_s)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                status, response_headers, response_body = proxy.forward(self.command, self.path, headers, body)
                if fault is Fault.TRUNCATE:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(response_body)))
                    self.end_headers()
                    self.wfile.write(response_body[: len(response_body) // 2])
                    self.wfile.flush()
                    return self.reset()
                if fault is Fault.REWRITE and proxy.rewrite is not None:
                    return self.reply(*proxy.rewrite((status, response_headers, response_body)))
                return self.reply(status, response_headers, response_body)

            do_GET = do_POST = do_PUT = do_DELETE = handle_any

        return Handler


class HeaderRecorder(BackgroundServer):
    """A server that only records what it is sent (path and headers) and answers ``{}``: the other host
    a hostile or misconfigured Redmine redirects to. It is reached as ``localhost`` (another host name
    than the proxy's 127.0.0.1) on its own port."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_: object) -> None:
                pass

            def do_GET(self) -> None:
                recorder.requests.append((self.path, dict(self.headers.items())))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        super().__init__(Handler, "recorder")

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}"
