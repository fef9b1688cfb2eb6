"""The map tools on a real ``ipyleaflet.Map`` (CONTRACT.md section 6 semantics via BaseMapPort).

``BaseMapPort`` checks arguments and shapes results; this class only reads and moves the Leaflet
map: WMS → ``WMSLayer``, WMTS → ``TileLayer`` with a KVP GetTile template (GoogleMapsCompatible,
GEO-FACTS §2), XYZ/TMS → ``TileLayer`` (``{-y}`` rows for TMS), GeoJSON → ``GeoJSON`` styled.
"""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote

from ..core.map_tools import BaseMapPort, fail
from ..core.webmercator import extent_from_view

log = logging.getLogger(__name__)

CustomTool = Callable[[dict[str, Any], Any], Any]
"""A user map tool: ``fn(args, ipyleaflet_map) -> JSON result``."""

IGN_ATTRIBUTION = (
    '© <a href="https://www.ign.es" target="_blank">Instituto Geográfico Nacional de España</a>'
    ' – CC BY 4.0 <a href="https://www.scne.es" target="_blank">scne.es</a>'
)
GEOJSON_STYLE = {"color": "#d9480f", "weight": 2, "opacity": 0.9, "fillOpacity": 0.15}
DETECTION_STYLE = {"color": "#e03131", "weight": 2, "opacity": 1.0, "fillOpacity": 0.35}
HOVER_STYLE = {"weight": 3, "fillOpacity": 0.4}
POINT_STYLE = {"radius": 6, "weight": 2, "fillOpacity": 0.6}
DEFAULT_SIZE = (800, 600)
_PIXEL_UNSET = 9007199254740991
# Matrix sets in another CRS than the Leaflet map's Web Mercator: their tiles would not line up.
_NON_MERCATOR = ("4326", "4258", "CRS84", "25829", "25830", "25831", "UTM", "3035", "32628")
_MAX_GEOJSON_BYTES = 20_000_000


def wmts_tile_url(
    url: str,
    layer: str,
    fmt: str = "image/png",
    style: str = "default",
    matrix_set: str = "GoogleMapsCompatible",
) -> str:
    """A Leaflet ``{z}/{x}/{y}`` template for a WMTS service (KVP GetTile or RESTful template)."""
    if "{TileMatrix}" in url or "{z}" in url:  # RESTful template from the capabilities
        return (
            url.replace("{TileMatrixSet}", matrix_set)
            .replace("{TileMatrix}", "{z}")
            .replace("{TileRow}", "{y}")
            .replace("{TileCol}", "{x}")
            .replace("{Style}", style)
            .replace("{Layer}", layer)
        )
    base = url if url.endswith(("?", "&")) else url + ("&" if "?" in url else "?")
    q = lambda v: quote(str(v), safe="/:-_.,")  # noqa: E731
    return (
        f"{base}SERVICE=WMTS&REQUEST=GetTile&VERSION=1.0.0&LAYER={q(layer)}&STYLE={q(style)}"
        f"&FORMAT={q(fmt)}&TILEMATRIXSET={q(matrix_set)}&TILEMATRIX={{z}}&TILEROW={{y}}&TILECOL={{x}}"
    )


class LeafletMapPort(BaseMapPort):
    """Runs the agent's map tools on an ``ipyleaflet.Map`` (any thread; trait updates sync)."""

    def __init__(self, map: Any, *, http_timeout: float = 10.0) -> None:
        super().__init__()
        self.map = map
        self.http_timeout = http_timeout
        self._meta: dict[str, dict[str, Any]] = {}
        self._custom: dict[str, CustomTool] = {}
        self._moved = False
        map.observe(self._on_bounds, names=["south", "north", "east", "west"])

    # ---- user additions ------------------------------------------------------------------
    def register_tool(self, name: str, fn: CustomTool) -> None:
        """Run a user's own map-side tool (a spec in a tools folder) with ``fn(args, map)``."""
        with self._lock:
            self._custom[name] = fn

    def describe_layer(self, layer: Any, **meta: Any) -> None:
        """Attach our definition (name, type, url, legend, base) to a layer already on the map."""
        with self._lock:
            self._meta[layer.model_id] = {**self._meta.get(layer.model_id, {}), **meta}

    def supports(self, name: str) -> bool:
        return name in self.tools or name in self._custom

    def call(self, name: str, args: dict[str, Any]) -> Any:
        fn = self._custom.get(name)
        if fn is None:
            return super().call(name, args)
        try:
            with self._lock:
                return fn(dict(args or {}), self.map)
        except Exception as exc:
            log.exception("La herramienta de mapa %s falló", name)
            return fail(f"Error en la herramienta '{name}': {exc}")

    def show_layer(self, layer: dict[str, Any]) -> None:
        """Draw a ``layer`` event; detections get their own style and keep their run id."""
        if str(layer.get("type", "")).lower() == "geojson" and layer.get("detection"):
            style = layer.get("style") or DETECTION_STYLE
            layer = {**layer, "style": style}
        result = None
        if str(layer.get("type", "")).lower() == "geojson":
            data = layer.get("source") if layer.get("source") is not None else layer.get("data")
            result = self.call(
                "addLayer",
                {
                    "type": "GeoJSON",
                    "name": layer.get("name", "geojson"),
                    "data": data,
                    "url": layer.get("url"),
                    "style": layer.get("style"),
                    "fit": bool(layer.get("fit", False)),
                    "detection": bool(layer.get("detection", False)),
                    "run_id": layer.get("run_id"),
                },
            )
        elif str(layer.get("type", "")).upper() in _BUILDERS:
            result = self.call("addLayer", {k: v for k, v in layer.items() if k != "source"})
        else:  # e.g. geocoding candidates: a list for the chat, nothing to draw
            log.debug("Evento de capa de tipo %r: no se dibuja", layer.get("type"))
            return
        if isinstance(result, dict) and result.get("success") is False:
            log.warning("No se pudo dibujar la capa %s: %s", layer.get("name"), result.get("error"))

    # ---- primitives ----------------------------------------------------------------------
    def _on_bounds(self, _change: Any) -> None:
        self._moved = False

    def _center(self) -> tuple[float, float]:
        lat, lon = self.map.center
        lon = ((float(lon) + 180.0) % 360.0) - 180.0
        return float(lat), lon

    def _zoom(self) -> float:
        zoom = float(self.map.zoom)
        return int(zoom) if zoom.is_integer() else zoom

    def _set_view(self, lat: float | None, lon: float | None, zoom: float | None) -> None:
        with self.map.hold_sync():
            if lat is not None and lon is not None:
                self.map.center = [lat, lon]
            if zoom is not None:
                self.map.zoom = zoom
        self._moved = True

    def _rendered(self) -> bool:
        m = self.map
        return m.left != _PIXEL_UNSET and m.right > m.left and m.bottom > m.top

    def _size(self) -> tuple[int, int]:
        m = self.map
        if self._rendered():
            return int(round(m.right - m.left)), int(round(m.bottom - m.top))
        width = _px(getattr(m.layout, "width", None)) or DEFAULT_SIZE[0]
        height = _px(getattr(m.layout, "height", None)) or DEFAULT_SIZE[1]
        return width, height

    def _bounds(self) -> tuple[float, float, float, float] | None:
        m = self.map
        if self._moved or not self._rendered() or m.north == m.south or m.east == m.west:
            return None
        return float(m.west), float(m.south), float(m.east), float(m.north)

    def extent(self) -> dict[str, Any]:
        bounds = self._bounds()
        if bounds is None:
            lat, lon = self._center()
            w, h = self._size()
            bounds = extent_from_view(lat, lon, float(self.map.zoom), w, h)
        min_lon, min_lat, max_lon, max_lat = bounds
        return {
            "minX": round(min_lon, 7),
            "minY": round(min_lat, 7),
            "maxX": round(max_lon, 7),
            "maxY": round(max_lat, 7),
            "srs": "EPSG:4326",
        }

    def _layers(self) -> list[dict[str, Any]]:
        out = []
        for index, layer in enumerate(self.map.layers):
            meta = self._meta.get(layer.model_id)
            if meta is None:
                meta = _describe_foreign(layer, index)
            out.append(
                {
                    "name": meta.get("name") or f"capa-{index}",
                    "type": meta.get("type", ""),
                    "url": meta.get("url") or "",
                    "legend": meta.get("legend") or meta.get("name") or "",
                    "visible": bool(getattr(layer, "visible", True)),
                    "base": bool(meta.get("base", getattr(layer, "base", False))),
                }
            )
        return out

    def _add(self, layer: dict[str, Any]) -> None:
        kind = layer["type"]
        builder = _BUILDERS.get(kind)
        if builder is None:
            raise ValueError(
                f"El tipo {kind} todavía no se puede mostrar en el mapa del notebook. "
                "Usa WMS, WMTS, XYZ, TMS, MVT o GeoJSON. (EN: layer type not supported here.)"
            )
        leaflet_layer = builder(self, layer)
        self.map.add(leaflet_layer)
        meta = {
            "name": layer["name"],
            "type": kind,
            "url": layer.get("url") or "",
            "legend": layer.get("legend") or layer["name"],
            "base": bool(layer.get("base", False)),
        }
        for key in ("detection", "run_id", "catalog_id"):
            if layer.get(key):
                meta[key] = layer[key]
        self._meta[leaflet_layer.model_id] = meta

    def _remove(self, name: str) -> None:
        for index, layer in enumerate(self.map.layers):
            meta = self._meta.get(layer.model_id) or _describe_foreign(layer, index)
            if meta.get("name") == name:
                self.map.remove(layer)
                self._meta.pop(layer.model_id, None)
                return
        raise ValueError(f"Layer not found: {name}")

    # ---- helpers for builders ------------------------------------------------------------
    def _fetch_geojson(self, url: str) -> dict[str, Any]:
        import httpx

        if not url.lower().startswith(("http://", "https://")):
            raise ValueError("La url del GeoJSON debe empezar por http:// o https://.")
        try:
            with httpx.Client(timeout=self.http_timeout, follow_redirects=True) as client:
                response = client.get(url)
        except httpx.HTTPError as exc:
            raise ValueError(
                f"No se pudo descargar el GeoJSON de {url}: {exc}. Comprueba la URL."
            ) from exc
        if response.status_code != 200:
            raise ValueError(f"El servidor respondió {response.status_code} al pedir {url}.")
        if len(response.content) > _MAX_GEOJSON_BYTES:
            raise ValueError("El GeoJSON es demasiado grande para el mapa del notebook (>20 MB).")
        try:
            data = response.json()
        except ValueError as exc:
            raise ValueError(f"La respuesta de {url} no es GeoJSON válido.") from exc
        if not isinstance(data, dict) or "type" not in data:
            raise ValueError(f"La respuesta de {url} no es un objeto GeoJSON.")
        return data


def _px(value: Any) -> int | None:
    text = str(value or "").strip()
    if text.endswith("px"):
        try:
            return int(float(text[:-2]))
        except ValueError:
            return None
    return None


def _describe_foreign(layer: Any, index: int) -> dict[str, Any]:
    """A definition for a layer the user added to their own map."""
    import ipyleaflet

    kind = ""
    if isinstance(layer, ipyleaflet.WMSLayer):
        kind = "WMS"
    elif isinstance(layer, ipyleaflet.TileLayer):
        kind = "TMS" if getattr(layer, "tms", False) or "{-y}" in layer.url else "XYZ"
    elif isinstance(layer, ipyleaflet.GeoJSON):
        kind = "GEOJSON"
    elif isinstance(layer, ipyleaflet.VectorTileLayer):
        kind = "MVT"
    name = getattr(layer, "name", "") or f"capa-{index}"
    if isinstance(layer, ipyleaflet.WMSLayer) and layer.layers:
        name = layer.layers
    return {
        "name": name,
        "type": kind or type(layer).__name__,
        "url": getattr(layer, "url", "") or "",
        "legend": getattr(layer, "name", "") or name,
        "base": bool(getattr(layer, "base", False)),
    }


class _AttributionCleaner(HTMLParser):
    """Keeps a few inline tags and http(s) links: Leaflet shows attributions as HTML."""

    ALLOWED = {"a", "b", "strong", "em", "i", "span", "p", "br", "small"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.ALLOWED:
            return
        if tag == "br":
            self.out.append("<br>")
            return
        extra = ""
        href = dict(attrs).get("href") or ""
        if tag == "a" and href.lower().startswith(("http://", "https://")):
            extra = f' href="{html.escape(href)}" target="_blank" rel="noopener noreferrer"'
        self.out.append(f"<{tag}{extra}>")
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:
            while self.open:
                closing = self.open.pop()
                self.out.append(f"</{closing}>")
                if closing == tag:
                    break

    def handle_data(self, data: str) -> None:
        self.out.append(html.escape(data))

    def result(self) -> str:
        return "".join(self.out) + "".join(f"</{t}>" for t in reversed(self.open))


def safe_attribution(text: str) -> str:
    """Attribution HTML with scripts, handlers and styles removed (it may come from the model)."""
    cleaner = _AttributionCleaner()
    cleaner.feed(str(text))
    cleaner.close()
    return cleaner.result()


def _tile_options(layer: dict[str, Any], *, tiled: bool = True) -> dict[str, Any]:
    # Leaflet's layer control shows names as HTML: the title is escaped text
    options: dict[str, Any] = {"name": html.escape(str(layer.get("legend") or layer["name"]))}
    if layer.get("attribution"):
        options["attribution"] = safe_attribution(str(layer["attribution"]))
    max_native = layer.get("maxZoom") or layer.get("max_zoom")
    if tiled or max_native:
        options["max_native_zoom"] = int(max_native) if max_native else 18
    options["max_zoom"] = 22
    if layer.get("opacity") is not None:
        options["opacity"] = float(layer["opacity"])
    return options


def _build_wms(port: LeafletMapPort, layer: dict[str, Any]) -> Any:
    import ipyleaflet

    return ipyleaflet.WMSLayer(
        url=str(layer["url"]),
        layers=str(layer.get("layer") or layer["name"]),
        styles=str(layer.get("style") or "") if isinstance(layer.get("style"), str) else "",
        format=str(layer.get("format") or "image/png"),
        transparent=bool(layer.get("transparent", True)),
        **_tile_options(layer, tiled=False),
    )


def _build_wmts(port: LeafletMapPort, layer: dict[str, Any]) -> Any:
    import ipyleaflet

    matrix_set = str(layer.get("matrixSet") or "GoogleMapsCompatible")
    if any(token in matrix_set.upper() for token in _NON_MERCATOR):
        raise ValueError(
            f"La matriz de teselas '{matrix_set}' no está en Web Mercator (EPSG:3857) y no encaja "
            "en este mapa. Usa matrixSet=GoogleMapsCompatible o el servicio WMS equivalente."
        )
    style = layer.get("style") if isinstance(layer.get("style"), str) else None
    url = wmts_tile_url(
        str(layer["url"]),
        str(layer.get("layer") or layer["name"]),
        str(layer.get("format") or "image/png"),
        style or "default",
        matrix_set,
    )
    return ipyleaflet.TileLayer(url=url, **_tile_options(layer))


def _build_xyz(port: LeafletMapPort, layer: dict[str, Any]) -> Any:
    import ipyleaflet

    url = str(layer["url"])
    if not all(token in url for token in ("{z}", "{x}")) or not ("{y}" in url or "{-y}" in url):
        raise ValueError(
            "La url de una capa XYZ/TMS debe ser una plantilla con {z}, {x} e {y} (o {-y})."
        )
    tms = layer["type"] == "TMS" and "{-y}" not in url
    return ipyleaflet.TileLayer(url=url, tms=tms, **_tile_options(layer))


def _build_mvt(port: LeafletMapPort, layer: dict[str, Any]) -> Any:
    import ipyleaflet

    return ipyleaflet.VectorTileLayer(
        url=str(layer["url"]), name=html.escape(str(layer.get("legend") or layer["name"]))
    )


def _build_geojson(port: LeafletMapPort, layer: dict[str, Any]) -> Any:
    import ipyleaflet

    data = layer.get("data")
    if data is None:
        data = port._fetch_geojson(str(layer["url"]))
        layer["data"] = data  # BaseMapPort fits to it when asked
    if data.get("type") not in ("FeatureCollection", "Feature"):
        data = {"type": "Feature", "geometry": data, "properties": {}}
    style = dict(DETECTION_STYLE if layer.get("detection") else GEOJSON_STYLE)
    custom = layer.get("style")
    if isinstance(custom, str) and custom.strip().startswith("{"):
        try:
            custom = json.loads(custom)
        except json.JSONDecodeError:
            custom = None
    if isinstance(custom, dict):
        style.update({k: v for k, v in custom.items() if isinstance(v, (str, int, float, bool))})
    point = {**POINT_STYLE, "color": style.get("color", GEOJSON_STYLE["color"])}
    return ipyleaflet.GeoJSON(
        data=data,
        style=style,
        hover_style=HOVER_STYLE,
        point_style=point,
        name=html.escape(str(layer.get("legend") or layer["name"])),
    )


_BUILDERS: dict[str, Callable[[LeafletMapPort, dict[str, Any]], Any]] = {
    "WMS": _build_wms,
    "WMTS": _build_wmts,
    "XYZ": _build_xyz,
    "TMS": _build_xyz,
    "MVT": _build_mvt,
    "GEOJSON": _build_geojson,
}


__all__ = ["IGN_ATTRIBUTION", "LeafletMapPort", "safe_attribution", "wmts_tile_url"]
