"""A loopback CartoCiudad geocoder speaking the real wire format (candidates, find, reverseGeocode).

Responses are the shapes in ``cartociudad_data/`` (copied from shared/data/cartociudad/examples:
OBSERVED fixtures, the geocoder's own sample geometry of Humanes de Madrid, and ILLUSTRATIVE
files built from the documented field set). A few extra records (province, community, a
settlement point) are ILLUSTRATIVE too. Knobs for tests: ``delay`` (seconds before answering),
``fail_status`` (answer every request with that HTTP status), ``requests`` (what was asked) and
``handler_seconds`` (the fake's own time per request, for the benchmark).

Also home of ``LoopbackHTTPServer``, the small threaded server the other geo fakes reuse.
"""

from __future__ import annotations

import copy
import json
import math
import threading
import time
import unicodedata
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

DATA = Path(__file__).parent / "cartociudad_data"
API_PATH = "/geocoder/api/geocoder"


class Reply:
    """What a route returns: status, body bytes, content type, extra headers."""

    def __init__(
        self,
        status: int = 200,
        body: bytes | str | Any = b"",
        content_type: str = "application/json;charset=UTF-8",
        headers: dict[str, str] | None = None,
    ) -> None:
        if not isinstance(body, (bytes, str)):
            body = json.dumps(body, ensure_ascii=False)
        self.status = status
        self.body = body.encode("utf-8") if isinstance(body, str) else body
        self.content_type = content_type
        self.headers = headers or {}


class LoopbackHTTPServer:
    """A threaded HTTP server on 127.0.0.1:<ephemeral>; subclasses implement ``route``."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.fail_status: int | None = None
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.handler_seconds: list[float] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> LoopbackHTTPServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: avoid 40 ms stalls

            def _serve(self, method: str) -> None:
                started = time.perf_counter()
                parts = urlsplit(self.path)
                params = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with fake._lock:
                    fake.requests.append((method, parts.path, params))
                if fake.delay:
                    time.sleep(fake.delay)
                if fake.fail_status:
                    reply = Reply(fake.fail_status, {"error": "fallo simulado"})
                else:
                    try:
                        reply = fake.route(method, parts.path, params, body, self)
                    except Exception as exc:  # a bug in the fake must show up as a 500
                        reply = Reply(500, {"error": repr(exc)})
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(len(reply.body)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    if method != "HEAD":
                        self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client stopped reading (size cap, timeout)
                elapsed = time.perf_counter() - started - (fake.delay or 0)
                with fake._lock:
                    fake.handler_seconds.append(elapsed)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_HEAD(self) -> None:
                self._serve("HEAD")

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> LoopbackHTTPServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return self._server.server_address[1]

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def paths(self) -> list[str]:
        with self._lock:
            return [p for _, p, _ in self.requests]

    def route(
        self, method: str, path: str, params: dict[str, str], body: bytes, handler: Any
    ) -> Reply:
        raise NotImplementedError


# ---------------------------------------------------------------------- CartoCiudad
ADMIN = ("municipio", "provincia", "comunidad autonoma")
# Per-type quotas and their order in candidates (shared/data/cartociudad/README.md 1.1).
QUOTAS = [
    ("poblacion", 2),
    ("municipio", 3),
    ("callejero", 7),
    ("carretera", 4),
    ("portal", 6),
    ("poi", 4),
    ("expendeduria", 2),
    ("punto_recarga_electrica", 2),
    ("toponimo", 3),
    ("provincia", 1),
    ("comunidad autonoma", 1),
]
# ILLUSTRATIVE geometries: rough rectangles from the gazetteer's settlement extents.
MADRID_PROVINCE_WKT = (
    "MULTIPOLYGON (((-4.58 39.88, -3.05 39.88, -3.05 41.17, -4.58 41.17, -4.58 39.88)))"
)


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text or "")
    kept = "".join(c for c in decomposed if not unicodedata.combining(c)).lower()
    return "".join(c if c.isalnum() else " " for c in kept)


def _load(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def _blank(record_id: str, kind: str, **fields: Any) -> dict[str, Any]:
    base = {
        "id": record_id,
        "province": None,
        "provinceCode": None,
        "comunidadAutonoma": None,
        "comunidadAutonomaCode": None,
        "muni": None,
        "muniCode": None,
        "type": kind,
        "address": None,
        "postalCode": None,
        "poblacion": None,
        "geom": None,
        "tip_via": None,
        "lat": 0.0,
        "lng": 0.0,
        "portalNumber": None,
        "noNumber": None,
        "stateMsg": "",
        "extension": None,
        "state": 0,
        "refCatastral": None,
        "countryCode": "011",
    }
    base.update(fields)
    return base


def build_records() -> list[dict[str, Any]]:
    """Full Address records (with ``geom``) the fake knows, in a stable order."""
    records: dict[tuple[str, str], dict[str, Any]] = {}

    def put(rec: dict[str, Any]) -> None:
        records[(str(rec["id"]), str(rec["type"]).lower())] = rec

    for rec in _load("candidates_q_Madrid.ILLUSTRATIVE.json"):
        put(copy.deepcopy(rec))
    for rec in _load("candidates_q_Calle_Iglesia_5_Madrid_limit_2.OBSERVED.json"):
        rec = copy.deepcopy(rec)
        rec["geom"] = f"POINT({rec['lng']} {rec['lat']})"
        put(rec)
    put(_load("find_id_28079_type_Municipio.ILLUSTRATIVE.json"))
    put(_load("find_id_28073_type_municipio.Humanes_de_Madrid.json"))
    put(_load("find_toponimo.OBSERVED.json"))
    put(_load("reverseGeocode_lon_-0.3446_lat_39.4724.OBSERVED.json"))
    # ILLUSTRATIVE completions so that find answers for every candidate of "Madrid".
    records[("28079000000", "poblacion")]["geom"] = "POINT(-3.687601 40.408412)"
    records[("280790000001", "callejero")]["geom"] = "LINESTRING(-3.6420 40.5410, -3.6380 40.5440)"
    records[("49103", "municipio")]["geom"] = (
        "MULTIPOLYGON (((-5.63 41.45, -5.57 41.45, -5.57 41.51, -5.63 41.51, -5.63 41.45)))"
    )
    records[("28", "provincia")]["geom"] = MADRID_PROVINCE_WKT
    records[("13", "comunidad autonoma")]["geom"] = MADRID_PROVINCE_WKT
    return list(records.values())


def _candidate_form(rec: dict[str, Any]) -> dict[str, Any]:
    out = dict(rec)
    out["geom"] = None  # candidates never carry geometry (README section 2)
    kind = str(rec["type"]).lower()
    if kind in ADMIN or kind == "poblacion":
        out["lat"], out["lng"] = 0.0, 0.0
    if kind == "municipio" and rec.get("province") and "," not in (rec.get("address") or ""):
        out["address"] = f"{rec['muni']}, {rec['province']}"
    return out


def _search_text(rec: dict[str, Any]) -> list[str]:
    fields = [rec.get("address"), rec.get("muni"), rec.get("poblacion")]
    kind = str(rec["type"]).lower()
    if kind == "provincia":
        fields.append(rec.get("province"))
    if kind == "comunidad autonoma":
        fields.append(rec.get("comunidadAutonoma"))
    return _fold(" ".join(f for f in fields if f)).split()


def _name_of(rec: dict[str, Any]) -> str:
    kind = str(rec["type"]).lower()
    key = {
        "municipio": "muni",
        "provincia": "province",
        "comunidad autonoma": "comunidadAutonoma",
        "poblacion": "poblacion",
    }.get(kind, "address")
    return _fold(rec.get(key) or "").strip()


class CartoCiudadFake(LoopbackHTTPServer):
    """The geocoder API root is ``fake.url`` (give it to ``CARTOCIUDAD_URL``)."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__(delay)
        self.records = build_records()
        self.humanes_geojson = _load(
            "find_id_28073_type_municipio_outputformat_geojson.Humanes_de_Madrid.json"
        )

    @property
    def url(self) -> str:
        return self.root + API_PATH

    def record(self, record_id: str, kind: str) -> dict[str, Any] | None:
        kind = kind.lower()
        kind = "carretera" if kind == "carreteras" else kind
        return next(
            (r for r in self.records if str(r["id"]) == record_id and r["type"].lower() == kind),
            None,
        )

    def search(self, q: str, limit: int, excluded: set[str]) -> list[dict[str, Any]]:
        words = _fold(q).split()
        if not words:
            return []
        if not any(c.isdigit() for c in q):  # portals and PKs only when q has digits
            excluded = excluded | {"portal"}
        matches = [
            r
            for r in self.records
            if r["type"].lower() not in excluded
            and all(any(t.startswith(w) for t in _search_text(r)) for w in words)
        ]
        exact = " ".join(words)
        out: list[dict[str, Any]] = []
        for kind, quota in QUOTAS:
            of_kind = [r for r in matches if r["type"].lower() == kind]
            of_kind.sort(key=lambda r: _name_of(r) != exact)
            out.extend(of_kind[:quota])
        return [_candidate_form(r) for r in out[:limit]]

    def route(
        self, method: str, path: str, params: dict[str, str], body: bytes, handler: Any
    ) -> Reply:
        if not path.startswith(API_PATH + "/"):
            return Reply(404, {"error": "not found"})
        endpoint = path[len(API_PATH) + 1 :]
        if endpoint == "candidates":
            if not params.get("q"):
                return Reply(400, {"error": "q es obligatorio"})
            limit = int(params.get("limit") or 33)
            excluded = {t.strip().lower() for t in params.get("no_process", "").split(",")}
            return Reply(200, self.search(params["q"], limit, excluded))
        if endpoint == "find":
            if params.get("id"):
                rec = self.record(params["id"], params.get("type", ""))
            elif params.get("q"):
                first = self.search(params["q"], 1, set())
                rec = self.record(first[0]["id"], first[0]["type"]) if first else None
            else:
                return Reply(400, {"error": "id+type o q"})
            if rec is None:
                return Reply(200, "")
            if params.get("outputformat", "").lower() == "geojson":
                if rec["id"] == "28073":
                    return Reply(200, self.humanes_geojson)
                return Reply(400, {"error": "outputformat geojson solo para 28073 en el fake"})
            return Reply(200, rec)
        if endpoint == "reverseGeocode":
            try:
                lon, lat = float(params["lon"]), float(params["lat"])
            except (KeyError, ValueError):
                return Reply(400, {"error": "lon y lat"})
            best, best_m = None, 350.0
            for rec in self.records:
                if rec["type"].lower() != "portal" or not rec.get("lat"):
                    continue
                metres = _haversine_m(lat, lon, rec["lat"], rec["lng"])
                if metres <= best_m:
                    best, best_m = rec, metres
            return Reply(200, best if best is not None else "")
        return Reply(404, {"error": f"endpoint desconocido {endpoint}"})


def _haversine_m(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6_371_000 * math.asin(math.sqrt(a))
