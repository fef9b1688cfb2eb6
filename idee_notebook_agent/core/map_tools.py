"""The map tool semantics (CONTRACT.md section 6), written once for every map we own.

``BaseMapPort`` checks arguments and shapes results; subclasses only move a real map
(``notebook.LeafletMapPort``) or an in-memory one (``HeadlessMapPort``). Failures come back as
``{"success": False, "error": ...}`` results, never as exceptions.
"""

from __future__ import annotations

import json
import logging
import threading
from abc import ABC, abstractmethod
from functools import lru_cache
from typing import Any

from .mapport import MAP_TOOLS
from .webmercator import extent_from_view, zoom_for_extent

log = logging.getLogger(__name__)

LAYER_TYPES = ("WMS", "WMTS", "WFS", "GEOJSON", "KML", "XYZ", "MVT", "TMS", "OGCAPIFEATURES")


@lru_cache(maxsize=32)
def _transformer(src: str, dst: str) -> Any:
    from pyproj import Transformer

    return Transformer.from_crs(src, dst, always_xy=True)


def to_degrees(x: float, y: float, srs: str) -> tuple[float, float]:
    """(lon, lat) in EPSG:4326 from (x, y) in ``srs``."""
    code = (srs or "EPSG:4326").upper()
    if code in ("EPSG:4326", "CRS:84", "WGS84"):
        return x, y
    lon, lat = _transformer(code, "EPSG:4326").transform(x, y)
    return float(lon), float(lat)


def from_degrees(lon: float, lat: float, srs: str) -> tuple[float, float]:
    """(x, y) in ``srs`` from (lon, lat) in degrees."""
    code = (srs or "EPSG:4326").upper()
    if code in ("EPSG:4326", "CRS:84", "WGS84"):
        return lon, lat
    x, y = _transformer("EPSG:4326", code).transform(lon, lat)
    return float(x), float(y)


def fail(message: str) -> dict[str, Any]:
    return {"success": False, "error": message}


def normalise_layer(args: dict[str, Any]) -> dict[str, Any]:
    """A full layer definition from ``addLayer`` arguments; raises ValueError when unusable."""
    layer_type = str(args.get("type") or "").upper().replace(" ", "")
    if not layer_type:
        raise ValueError(
            "Falta 'type' (WMS, WMTS, XYZ, TMS, GeoJSON...) o una capa del catálogo en 'name'."
        )
    if layer_type not in LAYER_TYPES:
        raise ValueError(
            f"Tipo de capa no soportado: {args.get('type')}. Usa uno de {', '.join(LAYER_TYPES)}."
        )
    layer = dict(args)
    layer["type"] = layer_type
    if layer_type == "GEOJSON":
        data = layer.get("data")
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as exc:
                raise ValueError(f"El GeoJSON de 'data' no es JSON válido: {exc.msg}") from exc
        if data is None and not layer.get("url"):
            raise ValueError("Se requiere url o data para GeoJSON")
        if data is not None and (not isinstance(data, dict) or "type" not in data):
            raise ValueError(
                "'data' debe ser un objeto GeoJSON (FeatureCollection, Feature o geometría)."
            )
        layer["data"] = data
    elif not layer.get("url"):
        raise ValueError(f"Falta 'url' para la capa {layer_type}.")
    if layer_type in ("WMS", "WMTS") and not (layer.get("name") or layer.get("layer")):
        raise ValueError(f"Falta 'name' (la capa del servicio) para {layer_type}.")
    layer.setdefault("name", layer.get("layer") or layer.get("legend") or layer_type.lower())
    layer.setdefault("legend", layer.get("name"))
    return layer


def geojson_bounds(data: dict[str, Any]) -> tuple[float, float, float, float] | None:
    """(minLon, minLat, maxLon, maxLat) of any GeoJSON object, or None when empty."""
    xs: list[float] = []
    ys: list[float] = []

    def walk(coords: Any) -> None:
        if isinstance(coords, (list, tuple)) and coords and isinstance(coords[0], (int, float)):
            xs.append(float(coords[0]))
            ys.append(float(coords[1]))
        elif isinstance(coords, (list, tuple)):
            for c in coords:
                walk(c)

    def visit(obj: Any) -> None:
        if not isinstance(obj, dict):
            return
        kind = obj.get("type")
        if kind == "FeatureCollection":
            for f in obj.get("features") or []:
                visit(f)
        elif kind == "Feature":
            visit(obj.get("geometry"))
        elif kind == "GeometryCollection":
            for g in obj.get("geometries") or []:
                visit(g)
        else:
            walk(obj.get("coordinates"))

    visit(data)
    if not xs:
        return None
    return min(xs), min(ys), max(xs), max(ys)


class BaseMapPort(ABC):
    """Map tools over a few primitives. Thread-safe: the agent may call from its own thread."""

    tools: tuple[str, ...] = MAP_TOOLS

    def __init__(self) -> None:
        self._lock = threading.RLock()

    # ---- primitives for subclasses -------------------------------------------------------
    @abstractmethod
    def _center(self) -> tuple[float, float]:
        """(lat, lon) in degrees."""

    @abstractmethod
    def _set_view(self, lat: float | None, lon: float | None, zoom: float | None) -> None: ...

    @abstractmethod
    def _zoom(self) -> float: ...

    @abstractmethod
    def _size(self) -> tuple[int, int]:
        """(width, height) in pixels of the view."""

    def _bounds(self) -> tuple[float, float, float, float] | None:
        """(minLon, minLat, maxLon, maxLat) as rendered, or None to compute from the view."""
        return None

    @abstractmethod
    def _layers(self) -> list[dict[str, Any]]:
        """Active layers as dicts with name, type, url, legend, visible, base."""

    @abstractmethod
    def _add(self, layer: dict[str, Any]) -> None: ...

    @abstractmethod
    def _remove(self, name: str) -> None: ...

    # ---- MapPort -------------------------------------------------------------------------
    def supports(self, name: str) -> bool:
        return name in self.tools

    def state(self) -> dict[str, Any]:
        with self._lock:
            lat, lon = self._center()
            ext = self.extent()
            return {
                "center": {"lat": round(lat, 6), "lon": round(lon, 6)},
                "zoom": self._zoom(),
                "extent": ext,
                "srs": "EPSG:4326",
                "layers": [layer["name"] for layer in self._layers()],
            }

    def extent(self) -> dict[str, Any]:
        bounds = self._bounds()
        if bounds is None:
            lat, lon = self._center()
            w, h = self._size()
            bounds = extent_from_view(lat, lon, self._zoom(), w, h)
        min_lon, min_lat, max_lon, max_lat = bounds
        return {
            "minX": round(min_lon, 7),
            "minY": round(min_lat, 7),
            "maxX": round(max_lon, 7),
            "maxY": round(max_lat, 7),
            "srs": "EPSG:4326",
        }

    def show_layer(self, layer: dict[str, Any]) -> None:
        """Draw a layer event from a server tool, e.g. detections or a municipality boundary."""
        kind = str(layer.get("type", "")).lower()
        if kind == "geojson":
            data = layer.get("source") or layer.get("data")
            self.call(
                "addLayer",
                {
                    "type": "GeoJSON",
                    "name": layer.get("name", "geojson"),
                    "data": data,
                    "url": layer.get("url"),
                    "style": layer.get("style"),
                    "fit": bool(layer.get("fit", False)),
                },
            )

    def call(self, name: str, args: dict[str, Any]) -> Any:
        if name not in self.tools:
            return fail(f"Unknown tool: {name}")
        method = getattr(self, f"tool_{name}")
        try:
            with self._lock:
                return method(**{k: v for k, v in (args or {}).items() if v is not None})
        except TypeError as exc:
            return fail(f"Argumentos no válidos para {name}: {exc}")
        except (ValueError, KeyError) as exc:
            return fail(str(exc))

    # ---- the tools -----------------------------------------------------------------------
    def tool_getMapCenter(self) -> dict[str, Any]:
        lat, lon = self._center()
        return {"lat": round(lat, 6), "lon": round(lon, 6), "srs": "EPSG:4326"}

    def tool_getCurrentZoom(self) -> dict[str, Any]:
        return {"level": self._zoom()}

    def tool_getMapExtent(self) -> dict[str, Any]:
        return self.extent()

    def tool_listActiveLayers(self) -> list[dict[str, Any]]:
        return [
            {
                "name": layer.get("name", ""),
                "type": layer.get("type", ""),
                "visible": layer.get("visible", True),
                "legend": layer.get("legend", "") or "",
                "url": layer.get("url", "") or "",
                "base": bool(layer.get("base", False)),
            }
            for layer in self._layers()
        ]

    def tool_zoomTo(
        self, lat: float, lon: float, zoom: int | None = None, srs: str = "EPSG:4326", **_: Any
    ) -> dict[str, Any]:
        lon_d, lat_d = to_degrees(float(lon), float(lat), srs)
        if not (-90 <= lat_d <= 90 and -180 <= lon_d <= 180):
            raise ValueError(
                f"Coordenadas fuera de rango: lat={lat_d}, lon={lon_d} (¿srs correcto?)."
            )
        if zoom is not None and not (0 <= int(zoom) <= 22):
            raise ValueError("El zoom debe estar entre 0 y 22.")
        self._set_view(lat_d, lon_d, None if zoom is None else int(zoom))
        return {
            "success": True,
            "center": {"lat": lat_d, "lon": lon_d},
            "zoom": self._zoom(),
            "srs": "EPSG:4326",
        }

    def tool_zoomToExtent(
        self, minLon: float, minLat: float, maxLon: float, maxLat: float, **_: Any
    ) -> dict[str, Any]:
        if minLon > maxLon or minLat > maxLat:
            raise ValueError("La extensión no es válida: min debe ser menor que max.")
        w, h = self._size()
        zoom = zoom_for_extent(minLon, minLat, maxLon, maxLat, w, h)
        self._set_view((minLat + maxLat) / 2, (minLon + maxLon) / 2, zoom)
        return {"success": True, "zoom": zoom, "srs": "EPSG:4326"}

    def tool_setZoom(self, level: int, **_: Any) -> dict[str, Any]:
        level = int(level)
        if not 0 <= level <= 22:
            raise ValueError("El zoom debe estar entre 0 y 22.")
        self._set_view(None, None, level)
        return {"success": True, "level": level}

    def tool_addLayer(self, **args: Any) -> dict[str, Any]:
        layer = normalise_layer(args)
        existing = {item["name"] for item in self._layers()}
        if layer["name"] in existing:
            self._remove(layer["name"])  # replace: same name means the same layer, updated
        self._add(layer)
        if layer.get("fit") and layer["type"] == "GEOJSON" and isinstance(layer.get("data"), dict):
            bounds = geojson_bounds(layer["data"])
            if bounds:
                self.tool_zoomToExtent(*bounds)
        return {"success": True, "name": layer["name"], "type": layer["type"]}

    def tool_removeLayer(self, name: str, force: bool = False, **_: Any) -> dict[str, Any]:
        for layer in self._layers():
            if layer.get("name") == name or (layer.get("legend") and layer.get("legend") == name):
                if layer.get("base") and not force:
                    return fail(
                        f"'{name}' es el mapa base; solo se quita si el usuario lo pide expresamente (force=true)."
                    )
                self._remove(layer["name"])
                return {"success": True, "name": layer["name"]}
        return fail(f"Layer not found: {name}")
