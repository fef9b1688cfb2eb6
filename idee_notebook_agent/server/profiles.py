"""Tool profiles: the agent's map calls as each browser plugin runs them, and results back.

The agent always reasons in degrees with our tool set (CONTRACT 14.2). ``/api`` serves the classic
API-IDEE chat plugin (addWMSLayer, zoomTo without reprojection, map units in ``map_state``);
``/api/v2`` serves the current plugin (addLayer, zoomToExtent, reprojection from ``args.srs``).
Coordinates are sent in the map's own SRS with ``srs`` added, which is right for both (6.3).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from ..core.agent import ToolResultInput
from ..core.conversation import ToolCall
from ..core.map_tools import from_degrees, to_degrees
from ..core.webmercator import zoom_for_extent

log = logging.getLogger(__name__)

DEGREE_CODES = ("EPSG:4326", "CRS:84", "WGS84", "EPSG:4258")
CLASSIC_DEFAULT_SRS = "EPSG:3857"
"""The API-IDEE viewer's default projection, assumed when the classic plugin sent no map state."""
VIEW_SIZE = (1000, 700)
"""Nominal viewport (px) used to turn an extent into a zoom level for the classic plugin."""

UNSUPPORTED_LAYER = (
    "Este visor (plugin clásico de API-IDEE) solo muestra capas WMS y esta capa es {kind}.{alternatives} "
    "(not supported by this viewer: the classic plugin shows WMS layers only)"
)


def _wms_alternatives(catalog_id: Any, limit: int = 3) -> str:
    """A sentence naming catalog WMS layers of the same kind, for the user to choose from."""
    if not catalog_id:
        return ""
    from ..services.catalog import get_catalog

    catalog = get_catalog()
    entry = catalog.get(str(catalog_id))
    category = entry.raw.get("category") if entry is not None else None
    if not category:
        return ""
    titles = [
        f"«{e.title_es}»"
        for e in catalog.entries
        if e.type == "WMS" and e.raw.get("category") == category
    ][:limit]
    return f" Alternativas WMS del catálogo: {', '.join(titles)}." if titles else ""


def _wms_equivalent(catalog_id: Any) -> dict[str, Any] | None:
    """The WMS definition of the same data as a catalog layer (e.g. PNOA WMTS → PNOA WMS)."""
    if not catalog_id:
        return None
    from ..services.catalog import get_catalog

    catalog = get_catalog()
    entry = catalog.get(str(catalog_id))
    target = entry.raw.get("wms_equivalent") if entry is not None else None
    wms = catalog.get(target) if target else None
    return wms.to_layer() if wms is not None and wms.type == "WMS" else None


def is_degrees(srs: str | None) -> bool:
    return (srs or "EPSG:4326").upper() in DEGREE_CODES


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def guess_srs(x: float, y: float) -> str:
    """Without an ``srs``, numbers outside the degree range are Web Mercator metres."""
    return "EPSG:4326" if abs(x) <= 180 and abs(y) <= 90 else "EPSG:3857"


def _to_deg(x: float, y: float, srs: str) -> tuple[float, float] | None:
    """(lon, lat) in degrees, or None when ``srs`` is unknown or the point is off the globe."""
    try:
        lon, lat = to_degrees(x, y, srs)
    except Exception:  # pyproj raises CRSError/ProjError for unknown codes or bad points
        log.warning("No se pudo reproyectar desde %s", srs)
        return None
    if not (math.isfinite(lon) and math.isfinite(lat) and -90 <= lat <= 90 and -180 <= lon <= 180):
        return None
    return round(lon, 7), round(lat, 7)


def _from_deg(lon: float, lat: float, srs: str) -> tuple[float, float] | None:
    try:
        x, y = from_degrees(lon, lat, srs)
    except Exception:
        log.warning("No se pudo reproyectar a %s", srs)
        return None
    if not (math.isfinite(x) and math.isfinite(y)):
        return None
    digits = 7 if is_degrees(srs) else 3
    return round(x, digits), round(y, digits)


def _extent_to_deg(ext: dict[str, Any], srs: str) -> dict[str, Any] | None:
    values = [_num(ext.get(k)) for k in ("minX", "minY", "maxX", "maxY")]
    if any(v is None for v in values):
        return None
    min_x, min_y, max_x, max_y = values  # type: ignore[misc]
    low = _to_deg(min_x, min_y, srs)
    high = _to_deg(max_x, max_y, srs)
    if low is None or high is None:
        return None
    return {"minX": low[0], "minY": low[1], "maxX": high[0], "maxY": high[1], "srs": "EPSG:4326"}


def map_state_for_model(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The plugin's ``map_state`` (map units) as the agent's state in degrees, plus the map SRS.

    Unreadable parts are left out rather than rejected: the plugin sends what its map gives.
    """
    if not isinstance(raw, dict):
        return None, None
    srs = raw.get("srs") if isinstance(raw.get("srs"), str) and raw.get("srs") else None
    state: dict[str, Any] = {}
    center = raw.get("center")
    if isinstance(center, dict):
        x, y = _num(center.get("lon")), _num(center.get("lat"))
        if x is not None and y is not None:
            src = srs or guess_srs(x, y)
            point = _to_deg(x, y, src)
            if point is not None:
                state["center"] = {"lat": point[1], "lon": point[0]}
                srs = src
    zoom = _num(raw.get("zoom"))
    if zoom is not None:
        state["zoom"] = zoom
    extent = raw.get("extent")
    if isinstance(extent, dict):
        x, y = _num(extent.get("minX")), _num(extent.get("minY"))
        if x is not None and y is not None:
            src = srs or guess_srs(x, y)
            converted = _extent_to_deg(extent, src)
            if converted is not None:
                state["extent"] = converted
    layers = raw.get("layers")
    if isinstance(layers, list):
        names = [
            item if isinstance(item, str) else item.get("name")
            for item in layers
            if isinstance(item, str) or (isinstance(item, dict) and item.get("name"))
        ]
        state["layers"] = [str(n) for n in names][:200]
    if not state:
        return None, srs
    state["srs"] = "EPSG:4326"
    return state, srs


@dataclass
class SentCall:
    """A map call sent to the plugin: its id, the name the plugin runs, and our tool's name."""

    id: str
    name: str
    tool: str

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "tool": self.tool}


class Profile:
    """The current plugin's profile: our tool names, coordinates in the map SRS."""

    name = "current"
    shape = "blocks"
    default_srs: str | None = None

    def map_srs(self, pstate: dict[str, Any]) -> str | None:
        return pstate.get("srs") or self.default_srs

    # ---- calls out -------------------------------------------------------------------------
    def translate_calls(
        self, calls: list[ToolCall], pstate: dict[str, Any]
    ) -> tuple[list[ToolCall], list[ToolResultInput]]:
        """Calls to send, and calls answered here (the plugin could not run them)."""
        send: list[ToolCall] = []
        local: list[ToolResultInput] = []
        for call in calls:
            out = self.translate(call, self.map_srs(pstate))
            if isinstance(out, ToolCall):
                send.append(out)
            else:
                local.append(ToolResultInput(call.name, out, call.id, False))
        return send, local

    def translate(self, call: ToolCall, srs: str | None) -> ToolCall | dict[str, Any]:
        if call.name == "zoomTo":
            return self._zoom_to(call, srs)
        return call

    def _zoom_to(self, call: ToolCall, srs: str | None) -> ToolCall:
        args = dict(call.args)
        x, y = _num(args.get("lon")), _num(args.get("lat"))
        if x is None or y is None:
            return call
        point = _to_deg(x, y, str(args.get("srs") or "EPSG:4326"))
        if point is None:
            return call
        target = srs or "EPSG:4326"
        moved = _from_deg(point[0], point[1], target)
        if moved is None:
            target, moved = "EPSG:4326", point
        args.update(lon=moved[0], lat=moved[1], srs=target)
        return ToolCall("zoomTo", args, call.id)

    # ---- results back ----------------------------------------------------------------------
    def result_for_model(self, tool: str, result: Any, pstate: dict[str, Any]) -> Any:
        """Map units in results (getMapCenter, getMapExtent) converted back to degrees."""
        if not isinstance(result, dict):
            return result
        srs = result.get("srs") if isinstance(result.get("srs"), str) else None
        if tool == "getMapCenter":
            x, y = _num(result.get("lon")), _num(result.get("lat"))
            if x is None or y is None:
                return result
            src = srs or self.map_srs(pstate) or guess_srs(x, y)
            if is_degrees(src):
                return result
            point = _to_deg(x, y, src)
            if point is None:
                return result
            if srs:
                pstate["srs"] = srs
            return {**result, "lat": point[1], "lon": point[0], "srs": "EPSG:4326"}
        if tool == "getMapExtent":
            x, y = _num(result.get("minX")), _num(result.get("minY"))
            if x is None or y is None:
                return result
            src = srs or self.map_srs(pstate) or guess_srs(x, y)
            if is_degrees(src):
                return result
            converted = _extent_to_deg(result, src)
            if converted is None:
                return result
            if srs:
                pstate["srs"] = srs
            return {**result, **converted}
        return result


class ClassicProfile(Profile):
    """The classic plugin: addWMSLayer only, zoomTo used as-is, no zoomToExtent."""

    name = "classic"
    shape = "classic"
    default_srs = CLASSIC_DEFAULT_SRS

    def translate(self, call: ToolCall, srs: str | None) -> ToolCall | dict[str, Any]:
        if call.name == "addLayer":
            return self._add_layer(call)
        if call.name == "zoomToExtent":
            return self._zoom_to_extent(call, srs)
        return super().translate(call, srs)

    def _add_layer(self, call: ToolCall) -> ToolCall | dict[str, Any]:
        args = call.args
        kind = str(args.get("type") or "").upper()
        if kind == "WMS" and args.get("url") and args.get("name"):
            out = {
                "url": args["url"],
                "name": args["name"],
                "legend": args.get("legend") or args["name"],
                "transparent": bool(args.get("transparent", True)),
            }
            return ToolCall("addWMSLayer", out, call.id)
        equivalent = _wms_equivalent(args.get("catalog_id"))
        if kind != "WMS" and equivalent is not None:
            # the same data served by WMS, which the classic plugin can show
            out = {
                "url": equivalent["url"],
                "name": equivalent["name"],
                "legend": args.get("legend") or equivalent["legend"],
                "transparent": bool(equivalent.get("transparent", True)),
            }
            return ToolCall("addWMSLayer", out, call.id)
        label = kind or "desconocido"
        if kind == "WMS":
            return {
                "success": False,
                "error": "Falta 'url' o 'name' para la capa WMS. (WMS layer needs url and name)",
            }
        alternatives = _wms_alternatives(args.get("catalog_id"))
        return {
            "success": False,
            "error": UNSUPPORTED_LAYER.format(kind=label, alternatives=alternatives),
        }

    def _zoom_to_extent(self, call: ToolCall, srs: str | None) -> ToolCall | dict[str, Any]:
        values = [_num(call.args.get(k)) for k in ("minLon", "minLat", "maxLon", "maxLat")]
        if any(v is None for v in values):
            return {
                "success": False,
                "error": "zoomToExtent necesita minLon, minLat, maxLon, maxLat.",
            }
        min_lon, min_lat, max_lon, max_lat = values  # type: ignore[misc]
        zoom = zoom_for_extent(min_lon, min_lat, max_lon, max_lat, *VIEW_SIZE)
        center = ToolCall(
            "zoomTo",
            {"lat": (min_lat + max_lat) / 2, "lon": (min_lon + max_lon) / 2, "zoom": zoom},
            call.id,
        )
        return self._zoom_to(center, srs)


CLASSIC = ClassicProfile()
CURRENT = Profile()

__all__ = ["CLASSIC", "CURRENT", "ClassicProfile", "Profile", "SentCall", "map_state_for_model"]
