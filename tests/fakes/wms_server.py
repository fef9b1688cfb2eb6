"""A WMS 1.3.0 server on 127.0.0.1 that serves georeferenced crops of the pool test images.

The five 512×512 images of ``../shared/data/pools`` are laid out as a 3 × 2 mosaic in
EPSG:25830 (top-left corner ``ORIGIN``, ``resolution`` m/px, the sixth cell an empty field), with
their annotated pools as world boxes. GetMap renders any bbox in any advertised CRS by
reprojecting each output pixel centre into the mosaic (pyproj + ``cv2.remap``), honouring the
WMS 1.3.0 axis order (EPSG:4326 BBOX is lat,lon). Two more layers paint synthetic "pools" whose
corners a test chooses, in a CRS the test chooses, to check georeferencing to the pixel:
``test.targets`` (all CRSs) and ``test.targets4326`` (only EPSG:4326 and CRS:84).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit
from xml.sax.saxutils import escape

import cv2
import numpy as np
from pyproj import CRS, Transformer

NATIVE_CRS = "EPSG:25830"
ORIGIN = (420000.0, 4480000.0)  # top-left of the mosaic, near Majadahonda (Madrid)
COLUMNS = 3
ALL_CRS = [
    "EPSG:25830",
    "EPSG:25829",
    "EPSG:25831",
    "EPSG:3857",
    "EPSG:4258",
    "EPSG:4326",
    "CRS:84",
]
BACKGROUND = (104, 112, 78)  # an olive field, RGB
POOL_COLOUR = (40, 190, 215)  # turquoise water, RGB
OGC_NS = "http://www.opengis.net/ogc"


@dataclass
class Target:
    """A synthetic pool: ``bounds`` (minx, miny, maxx, maxy) in ``crs``, painted as water."""

    crs: str
    bounds: tuple[float, float, float, float]


@dataclass
class FakeWms:
    """The running server and what a test needs to know about it."""

    url: str
    mosaic: np.ndarray
    resolution: float
    pool_boxes_native: list[tuple[float, float, float, float]]
    targets: list[Target] = field(default_factory=list)
    requests: list[dict[str, str]] = field(default_factory=list)
    delay: float = 0.0
    """Seconds to wait before answering a GetMap (timeouts)."""
    fail_getmap: int = 0
    """Answer the next N GetMap requests with HTTP 500."""
    redirect_getmap: str | None = None
    """Answer GetMap with a 302 to this URL (SSRF tests)."""
    getmap_href: str | None = None
    """Advertise this GetMap endpoint in the capabilities instead of the server's own URL."""
    server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def getmap_requests(self) -> list[dict[str, str]]:
        return [r for r in self.requests if r.get("request", "").lower() == "getmap"]

    @property
    def extent_native(self) -> tuple[float, float, float, float]:
        h, w = self.mosaic.shape[:2]
        x0, y0 = ORIGIN
        return (x0, y0 - h * self.resolution, x0 + w * self.resolution, y0)

    def pool_boxes(self, crs: str = NATIVE_CRS) -> list[tuple[float, float, float, float]]:
        """Annotated pools as envelopes in ``crs`` (x/y order)."""
        if crs == NATIVE_CRS:
            return list(self.pool_boxes_native)
        t = _transformer(NATIVE_CRS, crs)
        return [tuple(t.transform_bounds(*b, densify_pts=5)) for b in self.pool_boxes_native]

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def __enter__(self) -> FakeWms:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_TRANSFORMERS: dict[tuple[str, str], Transformer] = {}


def _crs(code: str) -> CRS:
    return CRS.from_user_input("OGC:CRS84" if code.upper() == "CRS:84" else code)


def _transformer(src: str, dst: str) -> Transformer:
    key = (src, dst)
    if key not in _TRANSFORMERS:
        _TRANSFORMERS[key] = Transformer.from_crs(_crs(src), _crs(dst), always_xy=True)
    return _TRANSFORMERS[key]


def _lat_first(code: str) -> bool:
    """WMS 1.3.0 uses the CRS's own axis order: EPSG:4326/4258 are (lat, lon)."""
    if code.upper() == "CRS:84":
        return False
    axes = _crs(code).axis_info
    return bool(axes) and axes[0].direction.lower() in ("north", "south")


def build_mosaic(pools_dir: Path, resolution: float):
    """The RGB mosaic and the annotated pools in EPSG:25830."""
    manifest = json.loads((pools_dir / "manifest.json").read_text(encoding="utf-8"))
    items = manifest["items"]
    rows = (len(items) + COLUMNS - 1) // COLUMNS
    size = 512
    mosaic = np.empty((rows * size, COLUMNS * size, 3), np.uint8)
    mosaic[:] = BACKGROUND
    boxes = []
    x0, y0 = ORIGIN
    for k, item in enumerate(items):
        img = cv2.imread(str(pools_dir / item["image"]), cv2.IMREAD_COLOR)
        if img is None or img.shape[:2] != (size, size):
            raise RuntimeError(f"unexpected test image {item['image']}")
        col, row = k % COLUMNS, k // COLUMNS
        mosaic[row * size : (row + 1) * size, col * size : (col + 1) * size] = img[:, :, ::-1]
        for bx1, by1, bx2, by2 in item["boxes_xyxy_px"]:
            u1, v1 = col * size + bx1, row * size + by1
            u2, v2 = col * size + bx2, row * size + by2
            boxes.append(
                (
                    x0 + u1 * resolution,
                    y0 - v2 * resolution,
                    x0 + u2 * resolution,
                    y0 - v1 * resolution,
                )
            )
    return mosaic, boxes


def _pixel_centres(bbox, width, height):
    minx, miny, maxx, maxy = bbox
    xs = minx + (np.arange(width) + 0.5) * (maxx - minx) / width
    ys = maxy - (np.arange(height) + 0.5) * (maxy - miny) / height
    return np.meshgrid(xs, ys)


def render(fake: FakeWms, layer: str, crs: str, bbox, width: int, height: int) -> np.ndarray:
    """The RGB image a GetMap for ``bbox`` (x/y order in ``crs``) returns."""
    gx, gy = _pixel_centres(bbox, width, height)
    if layer == "OI.OrthoimageCoverage":
        if crs == NATIVE_CRS:
            wx, wy = gx, gy
        else:
            wx, wy = _transformer(crs, NATIVE_CRS).transform(gx, gy)
        x0, y0 = ORIGIN
        map_x = ((np.asarray(wx) - x0) / fake.resolution - 0.5).astype(np.float32)
        map_y = ((y0 - np.asarray(wy)) / fake.resolution - 0.5).astype(np.float32)
        return cv2.remap(
            fake.mosaic,
            map_x,
            map_y,
            interpolation=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=BACKGROUND,
        )
    out = np.empty((height, width, 3), np.uint8)
    out[:] = BACKGROUND
    for target in fake.targets:
        if target.crs == crs:
            tx, ty = gx, gy
        else:
            tx, ty = _transformer(crs, target.crs).transform(gx, gy)
        minx, miny, maxx, maxy = target.bounds
        inside = (tx >= minx) & (tx < maxx) & (ty >= miny) & (ty < maxy)
        out[inside] = POOL_COLOUR
    return out


LAYERS = {
    "OI.OrthoimageCoverage": ("Ortoimagen PNOA (falsa, imágenes de prueba)", ALL_CRS),
    "test.targets": ("Objetivos sintéticos", ALL_CRS),
    "test.targets4326": ("Objetivos sintéticos solo en grados", ["EPSG:4326", "CRS:84"]),
}


def capabilities_xml(fake: FakeWms) -> str:
    url = escape(fake.url, {'"': "&quot;"})
    t = _transformer(NATIVE_CRS, "EPSG:4326")
    w, s, e, n = t.transform_bounds(*fake.extent_native)
    layers = []
    for name, (title, crs_list) in LAYERS.items():
        crs_xml = "".join(f"<CRS>{c}</CRS>" for c in crs_list)
        layers.append(
            f"""<Layer queryable="0"><Name>{name}</Name><Title>{escape(title)}</Title>{crs_xml}
<EX_GeographicBoundingBox><westBoundLongitude>{w}</westBoundLongitude>
<eastBoundLongitude>{e}</eastBoundLongitude><southBoundLatitude>{s}</southBoundLatitude>
<northBoundLatitude>{n}</northBoundLatitude></EX_GeographicBoundingBox></Layer>"""
        )

    def dcp(href: str) -> str:
        return (
            '<DCPType><HTTP><Get><OnlineResource xmlns:xlink="http://www.w3.org/1999/xlink" '
            f'xlink:type="simple" xlink:href="{escape(href, {chr(34): "&quot;"})}"/></Get></HTTP>'
            "</DCPType>"
        )

    return f"""<?xml version="1.0" encoding="UTF-8"?>
<WMS_Capabilities version="1.3.0" xmlns="http://www.opengis.net/wms"
 xmlns:xlink="http://www.w3.org/1999/xlink">
<Service><Name>WMS</Name><Title>PNOA falso para pruebas</Title>
<OnlineResource xlink:type="simple" xlink:href="{url}"/></Service>
<Capability>
<Request>
<GetCapabilities><Format>text/xml</Format>{dcp(fake.url + "?")}</GetCapabilities>
<GetMap><Format>image/jpeg</Format><Format>image/png</Format>{dcp(fake.getmap_href or fake.url + "?")}</GetMap>
</Request>
<Exception><Format>XML</Format></Exception>
<Layer><Title>PNOA falso</Title>
{"".join(layers)}
</Layer>
</Capability>
</WMS_Capabilities>"""


def exception_xml(code: str, message: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><ServiceExceptionReport version="1.3.0" '
        f'xmlns="{OGC_NS}"><ServiceException code="{code}">{escape(message)}</ServiceException>'
        "</ServiceExceptionReport>"
    ).encode()


def _handler(fake: FakeWms):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, ctype: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            params = {k.lower(): v for k, v in parse_qsl(parts.query, keep_blank_values=True)}
            with fake._lock:
                fake.requests.append(params)
            request = params.get("request", "").lower()
            if request == "getcapabilities":
                self._send(200, "text/xml", capabilities_xml(fake).encode())
                return
            if request != "getmap":
                self._send(200, "text/xml", exception_xml("OperationNotSupported", request))
                return
            if fake.redirect_getmap:
                self.send_response(302)
                self.send_header("Location", fake.redirect_getmap)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if fake.delay:
                time.sleep(fake.delay)
            with fake._lock:
                failing = fake.fail_getmap > 0
                if failing:
                    fake.fail_getmap -= 1
            if failing:
                self._send(500, "text/plain", b"internal error (fake)")
                return
            try:
                body, ctype = self._getmap(params)
            except ValueError as exc:
                code, _, message = str(exc).partition(":")
                self._send(200, "text/xml", exception_xml(code, message))
                return
            self._send(200, ctype, body)

        def _getmap(self, params: dict[str, str]) -> tuple[bytes, str]:
            layer = params.get("layers", "")
            if layer not in LAYERS:
                raise ValueError(f"LayerNotDefined:{layer}")
            version = params.get("version", "1.3.0")
            crs = (params.get("crs") or params.get("srs") or "").upper()
            if crs not in LAYERS[layer][1]:
                raise ValueError(f"InvalidCRS:{crs}")
            try:
                bbox = [float(v) for v in params["bbox"].split(",")]
                width, height = int(params["width"]), int(params["height"])
            except (KeyError, ValueError) as exc:
                raise ValueError(f"MissingParameterValue:{exc}") from exc
            if len(bbox) != 4 or not (0 < width <= 4096 and 0 < height <= 4096):
                raise ValueError("InvalidParameterValue:bbox/width/height")
            if version == "1.3.0" and _lat_first(crs):
                bbox = [bbox[1], bbox[0], bbox[3], bbox[2]]
            image = render(fake, layer, crs, bbox, width, height)
            fmt = params.get("format", "image/png")
            if fmt == "image/jpeg":
                ok, buf = cv2.imencode(".jpg", image[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 90])
            elif fmt == "image/png":
                ok, buf = cv2.imencode(".png", image[:, :, ::-1])
            else:
                raise ValueError(f"InvalidFormat:{fmt}")
            assert ok
            return buf.tobytes(), fmt

    return Handler


def start_wms_server(pools_dir: Path, *, resolution: float = 0.4) -> FakeWms:
    """Start the server on an ephemeral loopback port; ``close()`` (or ``with``) stops it."""
    mosaic, boxes = build_mosaic(Path(pools_dir), resolution)
    fake = FakeWms(url="", mosaic=mosaic, resolution=resolution, pool_boxes_native=boxes)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    fake.server = server
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/wms"
    threading.Thread(target=server.serve_forever, name="fake-wms", daemon=True).start()
    return fake
