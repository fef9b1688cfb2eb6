"""CRS handling for detection requests, and GeoJSON / GeoDataFrame / GeoPackage output.

All transformations use pyproj with ``always_xy=True`` (x = easting/longitude first), so axis
order only matters where it is on the wire: the WMS 1.3.0 BBOX, which owslib writes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import ToolError

Bounds = tuple[float, float, float, float]

WGS84 = "EPSG:4326"
WEB_MERCATOR = "EPSG:3857"
# ETRS89 / UTM zones advertised by PNOA (GEO-FACTS.md §2), west to east.
ETRS89_UTM = {29: "EPSG:25829", 30: "EPSG:25830", 31: "EPSG:25831"}


def normalize_srs(srs: str | None) -> str:
    """``EPSG:nnnn`` (or ``CRS:84``) for what a user or model wrote; ToolError if unknown."""
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    text = (srs or WGS84).strip()
    if text.isdigit():
        text = f"EPSG:{text}"
    if text.upper() in ("CRS:84", "OGC:CRS84", "CRS84"):
        return "CRS:84"
    if text.lower().startswith("urn:ogc:def:crs:epsg:"):
        text = "EPSG:" + text.rsplit(":", 1)[-1]
    try:
        crs = CRS.from_user_input(text)
    except CRSError as exc:
        raise ToolError(
            f"Sistema de referencia desconocido '{srs}'. Usa un código EPSG, p. ej. EPSG:4326, "
            "EPSG:3857 o EPSG:25830. (Unknown CRS.)"
        ) from exc
    epsg = crs.to_epsg()
    return f"EPSG:{epsg}" if epsg else text.upper()


@functools.lru_cache(maxsize=64)
def _crs(code: str):
    from pyproj import CRS

    return CRS.from_user_input("OGC:CRS84" if code == "CRS:84" else code)


@functools.lru_cache(maxsize=128)
def transformer(src: str, dst: str):
    """A cached x/y-ordered transformer (pyproj transformers are thread-safe to share)."""
    from pyproj import Transformer

    return Transformer.from_crs(_crs(src), _crs(dst), always_xy=True)


def is_geographic(code: str) -> bool:
    return bool(_crs(code).is_geographic)


def parse_bbox(bbox: Mapping[str, Any] | Iterable[float], srs: str) -> Bounds:
    """``(minx, miny, maxx, maxy)`` from a ``{minX, minY, maxX, maxY}`` dict or a 4-sequence.

    Rejects empty or inverted boxes and degrees that are obviously metres, with a message the
    model can act on.
    """
    try:
        if isinstance(bbox, Mapping):
            values = tuple(float(bbox[k]) for k in ("minX", "minY", "maxX", "maxY"))
        else:
            values = tuple(float(v) for v in bbox)
        if len(values) != 4:
            raise ValueError
    except (KeyError, TypeError, ValueError) as exc:
        raise ToolError(
            "El bbox debe tener minX, minY, maxX y maxY numéricos. (Invalid bbox.)"
        ) from exc
    minx, miny, maxx, maxy = values
    if not all(math.isfinite(v) for v in values):
        raise ToolError("El bbox contiene valores no finitos. (Invalid bbox.)")
    if minx >= maxx or miny >= maxy:
        raise ToolError(
            f"bbox vacío o invertido ({minx}, {miny}, {maxx}, {maxy}): minX < maxX y minY < maxY. "
            "(Empty or inverted bbox.)"
        )
    if is_geographic(srs) and not (
        -180 <= minx <= 180 and -180 <= maxx <= 180 and -90 <= miny <= 90 and -90 <= maxy <= 90
    ):
        raise ToolError(
            f"El bbox no parece estar en grados ({srs}): valores fuera de rango. Si está en metros "
            "indica srs='EPSG:3857' o 'EPSG:25830'. (bbox out of range for degrees.)"
        )
    return minx, miny, maxx, maxy


def transform_bounds(bbox: Bounds, src: str, dst: str) -> Bounds:
    """Envelope of ``bbox`` in ``dst`` (edges densified, so curved edges are covered)."""
    if src == dst:
        return bbox
    return tuple(transformer(src, dst).transform_bounds(*bbox, densify_pts=21))  # type: ignore[return-value]


def center_lonlat(bbox: Bounds, srs: str) -> tuple[float, float]:
    x = (bbox[0] + bbox[2]) / 2
    y = (bbox[1] + bbox[3]) / 2
    return transformer(srs, WGS84).transform(x, y)


def units_per_metre(code: str, lon: float, lat: float) -> tuple[float, float]:
    """Map units of ``code`` per ground metre east and north at (lon, lat).

    About 1 for UTM, ``1/cos(lat)`` for Web Mercator, tiny for degrees: the factor that turns a
    detector's m/px into a request pixel size in that CRS.
    """
    local = f"+proj=aeqd +lat_0={lat} +lon_0={lon} +datum=WGS84 +units=m +no_defs"
    t = _local_transformer(local, code)
    x0, y0 = t.transform(0.0, 0.0)
    xe, ye = t.transform(1.0, 0.0)
    xn, yn = t.transform(0.0, 1.0)
    return math.hypot(xe - x0, ye - y0), math.hypot(xn - x0, yn - y0)


@functools.lru_cache(maxsize=64)
def _local_transformer(local: str, code: str):
    from pyproj import CRS, Transformer

    return Transformer.from_crs(CRS.from_proj4(local), _crs(code), always_xy=True)


def utm_for(lon: float) -> str | None:
    """ETRS89 / UTM zone code for a longitude in peninsular Spain/Baleares, else None."""
    zone = int((lon + 180) // 6) + 1
    return ETRS89_UTM.get(zone)


def choose_work_crs(srs: str, supported: Iterable[str], lonlat: tuple[float, float]) -> str:
    """The CRS to request imagery in: the caller's if projected and offered, else a metric one.

    Preference: the request CRS (projected), the local ETRS89/UTM zone, Web Mercator, then
    whatever the service offers (degrees included, with the WMS 1.3.0 axis order handled by
    owslib). An empty ``supported`` means "unknown": then the request CRS is used as is.
    """
    offered = {normalize_srs_quiet(c) for c in supported}
    offered.discard(None)
    if not offered:
        return srs
    if srs in offered and not is_geographic(srs):
        return srs
    for code in (utm_for(lonlat[0]), WEB_MERCATOR):
        if code and code in offered:
            return code
    for code in sorted(c for c in offered if c and not is_geographic(c)):
        return code
    for code in (srs, WGS84, "CRS:84"):
        if code in offered:
            return code
    raise ToolError(
        "La capa WMS no ofrece ningún sistema de referencia utilizable "
        f"({', '.join(sorted(c for c in offered if c))}). (No usable CRS.)"
    )


def normalize_srs_quiet(code: str) -> str | None:
    try:
        return normalize_srs(code)
    except ToolError:
        return None


def box_polygon(bounds: Bounds, src: str, dst: str = WGS84, ndigits: int = 8) -> list[list[float]]:
    """The ring of a box in ``src`` transformed to ``dst`` (5 points, closed, counter-clockwise)."""
    minx, miny, maxx, maxy = bounds
    xs = [minx, maxx, maxx, minx, minx]
    ys = [miny, miny, maxy, maxy, miny]
    if src != dst:
        xs, ys = transformer(src, dst).transform(xs, ys)
    return [
        [round(float(x), ndigits), round(float(y), ndigits)] for x, y in zip(xs, ys, strict=True)
    ]


def feature_collection(features: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "FeatureCollection", "features": features}


def to_geodataframe(fc: Mapping[str, Any]):
    """A GeoDataFrame (EPSG:4326) from a detection FeatureCollection; empty keeps the columns."""
    try:
        import geopandas as gpd
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        from ..errors import MissingExtraError

        raise MissingExtraError("geopandas", "ml") from exc
    columns = ["detector", "class", "score", "method", "source", "run_id", "time"]
    features = list(fc.get("features", []))
    if not features:
        return gpd.GeoDataFrame(
            {c: [] for c in columns}, geometry=gpd.GeoSeries([], crs=WGS84), crs=WGS84
        )
    gdf = gpd.GeoDataFrame.from_features(features, crs=WGS84)
    gdf.index = [f.get("id", i) for i, f in enumerate(features)]
    return gdf


def write_geojson(gdf, path: str | Path) -> Path:
    """Write detections as GeoJSON (RFC 7946, EPSG:4326)."""
    path = Path(path)
    gdf.to_crs(WGS84).to_file(path, driver="GeoJSON")
    return path


def write_geopackage(gdf, path: str | Path, layer: str = "detections") -> Path:
    """Write (or replace) one layer of a GeoPackage."""
    path = Path(path)
    gdf.to_file(path, layer=layer, driver="GPKG")
    return path
