"""Loopback tile server: labelled 256×256 PNG tiles for ``/{z}/{x}/{y}.png`` (an offline basemap).

Also answers any other path under ``/wmts`` or ``/wms`` with a tile, so it can stand in for a
WMTS/WMS service; every request path is recorded for assertions. Port 0 = an ephemeral port.
"""

from __future__ import annotations

import io
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_TILE = re.compile(r"^/(\d+)/(\d+)/(\d+)\.png")


def tile_png(label: str, rgb: tuple[int, int, int] = (180, 200, 220)) -> bytes:
    """A 256×256 PNG with ``label`` written on it (Pillow)."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (256, 256), rgb)
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, 255, 255), outline=(90, 90, 90))
    draw.text((10, 10), label, fill=(20, 20, 20))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


class TileServer:
    """``with TileServer() as tiles: tiles.url`` → ``http://127.0.0.1:<port>/{z}/{x}/{y}.png``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.requests: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with server._lock:
                    server.requests.append(self.path)
                match = _TILE.match(self.path)
                if match:
                    z, x, y = (int(v) for v in match.groups())
                    body = tile_png(f"{z}/{x}/{y}", ((x * 40) % 256, (y * 70) % 256, 180))
                elif self.path.startswith(("/wmts", "/wms")):
                    body = tile_png("service")
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self._thread: threading.Thread | None = None

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The XYZ template for Leaflet."""
        return f"{self.base}/{{z}}/{{x}}/{{y}}.png"

    def start(self) -> TileServer:
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, name="tile-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> TileServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


if __name__ == "__main__":  # python -m tests.fakes.tile_server 8899
    import sys

    srv = TileServer(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0).start()
    print(srv.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        srv.stop()
