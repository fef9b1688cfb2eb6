"""``geocodePlace``: CartoCiudad candidates, boundaries of administrative units, reverse geocoding,
and the offline gazetteer when CartoCiudad cannot be reached.

"dame el municipio de Madrid" → ``geocodePlace(q="Madrid", type="municipio")`` → candidates →
``find`` → boundary as GeoJSON, drawn as a layer with ``fit: true`` and returned with its
``bbox`` (agreed result shape, see the module ``tools``), all in one tool call.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from ..config import Settings
from ..errors import ServiceError, ToolError
from .cartociudad import (
    ADMIN_TYPES,
    CCAA,
    MUNICIPIO,
    PROVINCIA,
    CartoCiudadUnavailable,
    address_of,
    candidate_from_address,
    client_for,
    geometry_of,
    norm_type,
)
from .gazetteer import ATTRIBUTION as GAZETTEER_ATTRIBUTION
from .gazetteer import get_gazetteer, query_keys

log = logging.getLogger(__name__)

EmitLayer = Callable[[dict[str, Any]], None]

MAX_RESULT_VERTICES = 250
"""The boundary in the tool result (read by the model) is simplified to at most this many
vertices and rounded to 1e-6° (~0.1 m); the drawn layer keeps the full geometry."""

CARTOCIUDAD_ATTRIBUTION = "CartoCiudad © Instituto Geográfico Nacional de España – CC BY 4.0"

_PREFIX_TYPES = (
    ("termino municipal de ", MUNICIPIO),
    ("ayuntamiento de ", MUNICIPIO),
    ("municipio de ", MUNICIPIO),
    ("provincia de ", PROVINCIA),
)


def _split_type_prefix(q: str) -> tuple[str, str | None]:
    from .textnorm import fold

    low = fold(q)
    for prefix, kind in _PREFIX_TYPES:
        if low.startswith(prefix):
            return q[len(prefix) :].strip(), kind
    return q, None


def layer_name(candidate: dict[str, Any]) -> str:
    """ "Municipio de Madrid", "Provincia de Cuenca", "Comunidad de Madrid (comunidad autónoma)"."""
    name = candidate.get("name") or candidate.get("address") or candidate.get("id")
    kind = candidate.get("type")
    if kind == MUNICIPIO:
        return f"Municipio de {name}"
    if kind == PROVINCIA:
        return f"Provincia de {name}"
    return f"{name} (comunidad autónoma)"


def _matches_type(candidate: dict[str, Any], wanted: str | None) -> bool:
    return wanted is None or candidate.get("type") == wanted


def _rank(candidates: list[dict[str, Any]], q: str, wanted: str | None) -> list[dict[str, Any]]:
    """Wanted type only; names equal to the query first, else CartoCiudad's own order."""
    keys = query_keys(q)
    from .gazetteer import name_keys

    def exactness(c: dict[str, Any]) -> int:
        names = name_keys(str(c.get("name") or "")) | name_keys(str(c.get("address") or ""))
        return 0 if keys & names else 1

    chosen = [c for c in candidates if _matches_type(c, wanted)]
    return sorted(chosen, key=exactness)  # stable: keeps the service's order otherwise


def _fill_from_gazetteer(candidate: dict[str, Any]) -> None:
    """Coordinates for administrative candidates, which ``candidates`` leaves at 0.0."""
    if candidate.get("lat") is not None and candidate.get("lon") is not None:
        return
    kind = candidate.get("type")
    if kind not in ADMIN_TYPES:
        return
    place = get_gazetteer().by_code(str(candidate.get("id")), kind)
    if place is not None:
        candidate["lat"], candidate["lon"] = round(place.lat, 6), round(place.lon, 6)


def _simplified(geometry: Any) -> Any:
    """A lighter copy for the model's context: fewer vertices, coordinates to 1e-6°."""
    import shapely

    if shapely.get_num_coordinates(geometry) <= MAX_RESULT_VERTICES:
        return shapely.set_precision(geometry, 1e-6)
    minx, miny, maxx, maxy = geometry.bounds
    tolerance = max(maxx - minx, maxy - miny) / 2000
    simple = geometry
    for _ in range(12):
        simple = geometry.simplify(tolerance, preserve_topology=True)
        if shapely.get_num_coordinates(simple) <= MAX_RESULT_VERTICES:
            break
        tolerance *= 2
    return shapely.set_precision(simple, 1e-6)


def _feature_collection(geometry: Any, candidate: dict[str, Any]) -> dict[str, Any]:
    import shapely

    return {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "id": candidate.get("id"),
                "geometry": json.loads(shapely.to_geojson(geometry)),
                "properties": {
                    "id": candidate.get("id"),
                    "name": candidate.get("name"),
                    "type": candidate.get("type"),
                    "province": candidate.get("province"),
                    "source": "CartoCiudad (IGN)",
                    "attribution": CARTOCIUDAD_ATTRIBUTION,
                },
            }
        ],
    }


def _apply_find(
    result: dict[str, Any],
    best: dict[str, Any],
    found: dict[str, Any],
    draw: bool,
    emit_layer: EmitLayer | None,
) -> None:
    """Coordinates, boundary and layer from a ``find`` answer, in place."""
    props = address_of(found)
    for key, field in (("lat", "lat"), ("lon", "lng")):
        if best.get(key) is None and props.get(field) not in (None, 0, 0.0):
            best[key] = float(props[field])
    try:
        geometry = geometry_of(found)
    except Exception as exc:  # shapely/WKT errors: keep the candidates, say what failed
        log.warning("Geometría no legible de CartoCiudad para %s: %s", best.get("id"), exc)
        result["warning"] = "No se pudo leer la geometría devuelta por CartoCiudad."
        return
    if geometry is None:
        return
    if best.get("lat") is None or best.get("lon") is None:
        point = geometry.representative_point()
        best["lat"], best["lon"] = round(point.y, 7), round(point.x, 7)
    if best.get("type") not in ADMIN_TYPES or geometry.geom_type not in (
        "Polygon",
        "MultiPolygon",
        "GeometryCollection",
    ):
        return
    bbox = [round(v, 6) for v in geometry.bounds]
    best["bbox"] = bbox
    result["bbox"] = bbox
    import shapely

    full = _feature_collection(geometry, best)
    simple = _simplified(geometry)
    result["boundary"] = _feature_collection(simple, best)
    if shapely.get_num_coordinates(simple) < shapely.get_num_coordinates(geometry):
        result["boundary_simplified"] = True
    name = layer_name(best)
    result["layer_name"] = name
    if draw and emit_layer is not None:
        emit_layer({"type": "geojson", "name": name, "source": full, "fit": True})
        result["drawn"] = True


def _no_results(q: str, message: str, candidates: list[dict[str, Any]] | None = None) -> dict:
    return {"success": False, "error": message, "query": q, "candidates": candidates or []}


def _gazetteer_answer(
    q: str, entity_id: str | None, wanted: str | None, reason: str, limit: int
) -> dict[str, Any]:
    """The offline answer for municipality/province/community names, or ServiceError."""
    gaz = get_gazetteer()
    if entity_id:
        place = gaz.by_code(entity_id, wanted if wanted in ADMIN_TYPES else None)
        places = [place] if place else []
    elif wanted in (None, MUNICIPIO, PROVINCIA, CCAA, "poblacion"):
        kind = MUNICIPIO if wanted == "poblacion" else wanted
        places = gaz.lookup(q, kind, limit=limit)
    else:
        places = []
    if not places:
        raise ServiceError(
            f"{reason} El nomenclátor sin conexión solo conoce municipios, provincias y "
            f"comunidades autónomas y no encontró '{entity_id or q}'. Reintenta más tarde. "
            "(EN: CartoCiudad is unavailable and the offline gazetteer has no match.)"
        )
    candidates = [p.candidate() for p in places]
    best = candidates[0]
    return {
        "success": True,
        "source": "gazetteer",
        "query": q or entity_id,
        "candidates": candidates,
        "best": best,
        "bbox": best["bbox"],
        "note": (
            f"{reason} Respuesta del nomenclátor sin conexión ({GAZETTEER_ATTRIBUTION}): "
            "coordenadas del núcleo capital, sin contorno; la extensión (bbox) es aproximada. "
            "(EN: offline gazetteer answer, approximate extent, no boundary.)"
        ),
    }


def reverse_geocode(lat: float, lon: float, settings: Settings) -> dict[str, Any]:
    """What is at (lat, lon): CartoCiudad's nearest portal, or the nearest municipality offline."""
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise ToolError(f"Coordenadas fuera de rango: lat={lat}, lon={lon}.")
    gaz = get_gazetteer()
    try:
        raw = client_for(settings).reverse(lat, lon)
    except CartoCiudadUnavailable as exc:
        place, km = gaz.nearest_municipality(lat, lon)
        return {
            "success": True,
            "source": "gazetteer",
            "query": {"lat": lat, "lon": lon},
            "result": {**place.candidate(), "distance_km": round(km, 2)},
            "note": (
                f"{exc} Respuesta aproximada del nomenclátor sin conexión: el municipio cuyo "
                f"núcleo capital está más cerca ({km:.1f} km). ({GAZETTEER_ATTRIBUTION})"
            ),
        }
    if raw is None:
        place, km = gaz.nearest_municipality(lat, lon)
        return {
            "success": False,
            "error": (
                f"CartoCiudad no tiene ninguna dirección a menos de 350 m de ({lat}, {lon}). "
                f"El núcleo de población más cercano es {place.name} ({place.province}), "
                f"a {km:.1f} km."
            ),
            "candidates": [],
            "nearest_municipality": place.candidate(),
        }
    candidate = candidate_from_address(raw)
    if candidate["lat"] is None or candidate["lon"] is None:
        geometry = geometry_of(raw)
        if geometry is not None:
            point = geometry.representative_point()
            candidate["lat"], candidate["lon"] = round(point.y, 7), round(point.x, 7)
    return {
        "success": True,
        "source": "cartociudad",
        "query": {"lat": lat, "lon": lon},
        "result": candidate,
    }


def geocode_place(
    args: dict[str, Any], settings: Settings, emit_layer: EmitLayer | None = None
) -> dict[str, Any]:
    """Run ``geocodePlace`` with the arguments of its tool spec; see the module docstring."""
    q = str(args.get("q") or "").strip()
    entity_id = str(args.get("id") or "").strip() or None
    wanted = norm_type(args.get("type"))
    portal = args.get("portal")
    limit = max(1, min(int(args.get("limit") or 10), 50))
    draw = bool(args.get("draw", True))
    lat, lon = args.get("lat"), args.get("lon")

    if (lat is None) != (lon is None):
        raise ToolError("Para geocodificación inversa indica a la vez lat y lon (en grados).")
    if lat is not None and not q and not entity_id:
        return reverse_geocode(float(lat), float(lon), settings)
    if not q and not entity_id:
        raise ToolError(
            "Indica 'q' (texto a buscar), o 'id' y 'type', o 'lat' y 'lon'. "
            "(EN: give q, or id and type, or lat and lon.)"
        )
    if entity_id and not wanted:
        raise ToolError(
            "Con 'id' hace falta 'type' (p. ej. municipio, provincia, callejero, portal)."
        )
    if q and wanted is None:
        q, wanted = _split_type_prefix(q)
    if q and not entity_id and wanted == "refcatastral":
        entity_id = q.replace(" ", "")  # a cadastral reference is looked up with find

    client = client_for(settings)
    try:
        if entity_id:
            found = client.find(entity_id, wanted or "", portal)
            if found is None:
                return _no_results(
                    entity_id, f"CartoCiudad no encontró ningún {wanted} con id '{entity_id}'."
                )
            best = candidate_from_address(address_of(found))
            best["type"] = best["type"] or wanted
            result: dict[str, Any] = {
                "success": True,
                "source": "cartociudad",
                "query": entity_id,
                "candidates": [best],
                "best": best,
            }
            _apply_find(result, best, found, draw, emit_layer)
            return result

        raw = client.candidates(q, max(limit, 10), only_type=wanted)
        candidates = [candidate_from_address(r) for r in raw]
        ranked = _rank(candidates, q, wanted)
        raw_found: dict[str, Any] | None = None
        if not ranked and wanted in ADMIN_TYPES:
            # Not among the candidates (quotas, spelling): the INE code from the gazetteer
            # still lets ``find`` return the official boundary.
            places = get_gazetteer().lookup(q, wanted, limit=1)
            raw_found = client.find(places[0].code, wanted) if places else None
            if raw_found is not None:
                best = candidate_from_address(address_of(raw_found))
                best["type"] = best["type"] or wanted
                ranked = [best]
        if not ranked:
            if candidates:
                return _no_results(
                    q,
                    f"CartoCiudad no encontró ningún {wanted} llamado '{q}'. Hay otros "
                    "resultados en 'candidates'.",
                    candidates[:limit],
                )
            return _no_results(q, f"CartoCiudad no encontró resultados para '{q}'.")
        ranked = ranked[:limit]
        best = ranked[0]
        result = {
            "success": True,
            "source": "cartociudad",
            "query": q,
            "candidates": ranked,
            "best": best,
        }
        needs_find = best["type"] in ADMIN_TYPES or best.get("lat") is None
        if raw_found is None and needs_find and best.get("id"):
            try:
                raw_found = client.find(best["id"], best["type"], portal)
            except CartoCiudadUnavailable as exc:  # keep the candidates we already have
                result["warning"] = f"No se pudo obtener la geometría: {exc}"
        if raw_found is not None:
            _apply_find(result, best, raw_found, draw, emit_layer)
        for candidate in ranked:
            _fill_from_gazetteer(candidate)
        if "bbox" not in result and best["type"] in ADMIN_TYPES and "warning" in result:
            place = get_gazetteer().by_code(best["id"], best["type"])
            if place is not None and place.bbox:
                best["bbox"] = result["bbox"] = [round(v, 5) for v in place.bbox]
                result["bbox_approx"] = True
        return result
    except CartoCiudadUnavailable as exc:
        log.info("CartoCiudad no disponible (%s); se usa el nomenclátor sin conexión", exc)
        return _gazetteer_answer(q, entity_id, wanted, str(exc), limit)
