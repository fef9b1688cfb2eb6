"""A small threaded HTTP server on 127.0.0.1 shared by the LLM fakes (OpenAI and Gemini).

The fakes speak the real wire formats so the real SDKs are exercised end to end. This module
holds what both need: request recording, a queue of scripted replies, chunked SSE writing that
notices when the client hangs up (how the cancellation tests see that a stream was closed).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class RecordedRequest:
    """One request as the fake received it."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    json: Any = None

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass
class ErrorReply:
    """An HTTP error with a JSON body in the provider's own error shape."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamLog:
    """What happened to one streamed reply: how much was sent, and whether the client left."""

    planned_events: int
    sent_events: int = 0
    client_disconnected: bool = False
    finished: bool = False


class ClientGone(Exception):
    """The client closed the connection while we were writing."""


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up is expected here (cancellation tests); anything else is not."""
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class FakeLLMServer:
    """Base of the fakes: start/stop, recorded requests, scripted replies."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.replies: list[Any] = []
        self.streams: list[StreamLog] = []
        self.disconnected = threading.Event()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FakeLLMServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:  # keep test output quiet
                return

            def do_GET(self) -> None:
                fake._dispatch(self, "GET")

            def do_POST(self) -> None:
                fake._dispatch(self, "POST")

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=type(self).__name__,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def port(self) -> int:
        assert self._httpd is not None, "the fake is not running"
        return self._httpd.server_address[1]

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------------ scripting
    def queue(self, *replies: Any) -> None:
        with self._lock:
            self.replies.extend(replies)

    def _next_reply(self) -> Any:
        with self._lock:
            return self.replies.pop(0) if self.replies else None

    def requests_to(self, fragment: str) -> list[RecordedRequest]:
        return [r for r in self.requests if fragment in r.path]

    async def wait_disconnect(self, timeout: float = 10.0) -> bool:
        """Wait (without blocking the event loop) until a client hangs up mid-stream."""
        import asyncio

        return await asyncio.to_thread(self.disconnected.wait, timeout)

    # ------------------------------------------------------------------ HTTP plumbing
    def _dispatch(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        request = RecordedRequest(
            method=method,
            path=parts.path,
            query=parse_qs(parts.query),
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=body,
            json=parsed,
        )
        with self._lock:
            self.requests.append(request)
        try:
            self.handle(handler, request)
        except ClientGone:
            handler.close_connection = True

    def handle(self, handler: BaseHTTPRequestHandler, request: RecordedRequest) -> None:
        raise NotImplementedError

    @staticmethod
    def send_json(
        handler: BaseHTTPRequestHandler,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)
        handler.wfile.flush()

    def send_sse(
        self,
        handler: BaseHTTPRequestHandler,
        events: list[str],
        delay: float = 0.0,
        first_delay: float = 0.0,
    ) -> StreamLog:
        """Write ``events`` (the text after ``data: ``) as chunked SSE, noticing a hang-up."""
        log = StreamLog(planned_events=len(events))
        with self._lock:
            self.streams.append(log)
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        try:
            handler.wfile.flush()
            if first_delay:
                time.sleep(first_delay)
            for index, event in enumerate(events):
                if delay and index:
                    time.sleep(delay)
                self._write_chunk(handler, f"data: {event}\n\n".encode())
                log.sent_events += 1
            self._write_chunk(handler, b"")
            log.finished = True
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError) as exc:
            log.client_disconnected = True
            self.disconnected.set()
            raise ClientGone() from exc
        return log

    @staticmethod
    def _write_chunk(handler: BaseHTTPRequestHandler, data: bytes) -> None:
        handler.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        handler.wfile.flush()

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def split_text(text: str, size: int) -> list[str]:
    """Split ``text`` into pieces of ``size`` characters (how tokens trickle in)."""
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] or []
