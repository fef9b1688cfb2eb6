"""A loopback HTTP server that serves fixed files (model downloads): ``{path: bytes}``."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FileServer:
    files: dict[str, bytes] = field(default_factory=dict)
    url: str = ""
    hits: list[str] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def __enter__(self) -> FileServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def start_file_server(files: dict[str, bytes]) -> FileServer:
    state = FileServer(dict(files))

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            state.hits.append(self.path)
            body = state.files.get(self.path)
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.server = server
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, name="fake-files", daemon=True).start()
    return state
