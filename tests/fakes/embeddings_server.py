"""Loopback fake of the OpenAI ``/v1/embeddings`` and Gemini ``batchEmbedContents`` endpoints.

Vectors are a deterministic hashed bag of words (accents folded), so similar texts get similar
vectors and retrieval through the real SDKs can be checked end to end. Replies are deliberately
not normalised: the client must normalise them. A wrong key gets the provider's 401/400 shape.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import threading
import unicodedata
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

DIM = 64
_WORD = re.compile(r"\w+")


def fake_vector(text: str, dim: int = DIM) -> list[float]:
    """Hashed bag of words (not normalised)."""
    folded = "".join(
        c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c)
    )
    vec = [0.0] * dim
    for word in _WORD.findall(folded):
        if len(word) < 3:
            continue
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        slot = int.from_bytes(digest[:4], "little") % dim
        vec[slot] += 3.0 if digest[4] & 1 else 2.0
    vec[0] += 0.5  # never all zeros
    return vec


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        return


class FakeEmbeddingsServer:
    """Both providers on one port. ``requests`` records (path, JSON body, headers)."""

    def __init__(self, api_key: str = "test-key", dim: int = DIM) -> None:
        self.api_key = api_key
        self.dim = dim
        self.requests: list[tuple[str, Any, dict[str, str]]] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    def start(self) -> FakeEmbeddingsServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                headers = {k.lower(): v for k, v in self.headers.items()}
                path = urlsplit(self.path).path
                with fake._lock:
                    fake.requests.append((path, body, headers))
                status, payload = fake.answer(path, body, headers)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    @property
    def root(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.root}/v1"

    # ------------------------------------------------------------------ wire formats
    def answer(self, path: str, body: Any, headers: dict[str, str]) -> tuple[int, Any]:
        if path.endswith("/embeddings"):
            return self._openai(body, headers)
        if path.endswith(":batchEmbedContents"):
            return self._gemini(body, headers)
        return 404, {"error": {"message": f"ruta desconocida {path}"}}

    def _openai(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        if headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, {
                "error": {
                    "message": "Incorrect API key provided.",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            }
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = []
        for i, text in enumerate(texts):
            vec = fake_vector(text, self.dim)
            if body.get("encoding_format") == "base64":
                packed = struct.pack(f"<{len(vec)}f", *vec)
                embedding: Any = base64.b64encode(packed).decode()
            else:
                embedding = vec
            data.append({"object": "embedding", "index": i, "embedding": embedding})
        data.reverse()  # the client must order by ``index``
        tokens = sum(len(t.split()) for t in texts)
        return 200, {
            "object": "list",
            "data": data,
            "model": body.get("model"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def _gemini(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, Any]:
        if headers.get("x-goog-api-key") != self.api_key:
            return 400, {
                "error": {
                    "code": 400,
                    "message": "API key not valid. Please pass a valid API key.",
                    "status": "INVALID_ARGUMENT",
                }
            }
        out = []
        for request in body.get("requests", []):
            text = " ".join(p.get("text", "") for p in request["content"]["parts"])
            out.append({"values": fake_vector(text, self.dim)})
        return 200, {"embeddings": out}
