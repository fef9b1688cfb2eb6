"""CartoCiudad geocoder client (IGN): ``candidates``, ``find`` and ``reverseGeocode``.

Wire facts (shared/data/cartociudad/README.md, from the geocoder's own source): ``candidates``
returns a JSON array of Address objects without geometry; ``find`` returns one Address whose
``geom`` is WKT (MULTIPOLYGON for municipalities, EPSG:4326 lon/lat); ``type`` comes back as
"Municipio" for municipalities and is compared case-insensitively. The base URL is a setting
(``CARTOCIUDAD_URL``), trusted configuration, so it is not put through the SSRF guard.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from typing import Any

import httpx

from ..config import Settings
from ..errors import ServiceError
from .cache import TTLCache
from .ssrf import USER_AGENT

log = logging.getLogger(__name__)

MUNICIPIO = "municipio"
PROVINCIA = "provincia"
CCAA = "comunidad autonoma"
ADMIN_TYPES = (MUNICIPIO, PROVINCIA, CCAA)

# Every type ``no_process`` accepts (README 1.1), to ask only for the wanted one.
ALL_TYPES = (
    "municipio",
    "provincia",
    "comunidad autonoma",
    "poblacion",
    "toponimo",
    "expendeduria",
    "punto_recarga_electrica",
    "ngbe",
    "callejero",
    "carretera",
    "portal",
)
_TYPE_ALIASES = {
    "carreteras": "carretera",
    "ccaa": CCAA,
    "comunidad": CCAA,
    "comunidad autónoma": CCAA,
    "comunidad_autonoma": CCAA,
    "calle": "callejero",
    "población": "poblacion",
    "topónimo": "toponimo",
    "pk": "portal",
}

_CACHE: TTLCache[Any] = TTLCache(maxsize=512, ttl=6 * 3600)
"""Answers of CartoCiudad by (base URL, endpoint, params): places do not move within hours."""


class CartoCiudadUnavailable(ServiceError):
    """CartoCiudad is down, slow or answered nonsense: the offline gazetteer may step in."""


def norm_type(value: str | None) -> str | None:
    """Canonical lower-case CartoCiudad type ("Municipio" → municipio, carreteras → carretera)."""
    if not value:
        return None
    low = str(value).strip().lower().replace("_", " ")
    if low in ("punto recarga electrica",):
        return "punto_recarga_electrica"
    return _TYPE_ALIASES.get(low, low)


def _coord(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number == 0.0 else number  # candidates leave 0.0 for administrative units


def candidate_from_address(raw: dict[str, Any]) -> dict[str, Any]:
    """An Address object as the agreed candidate shape (plus a few useful extras)."""
    kind = norm_type(raw.get("type")) or ""
    address = raw.get("address") or ""
    if kind == MUNICIPIO:
        name = raw.get("muni") or address.split(",")[0]
    elif kind == PROVINCIA:
        name = raw.get("province") or address
    elif kind == CCAA:
        name = raw.get("comunidadAutonoma") or address
    elif kind == "poblacion":
        name = raw.get("poblacion") or address
    else:
        name = address
    candidate: dict[str, Any] = {
        "id": str(raw.get("id") or ""),
        "type": kind,
        "name": name,
        "address": address,
        "lat": _coord(raw.get("lat")),
        "lon": _coord(raw.get("lng", raw.get("lon"))),
        "muni": raw.get("muni"),
        "province": raw.get("province"),
        "bbox": None,
    }
    extras = {
        "muni_code": raw.get("muniCode"),
        "province_code": raw.get("provinceCode"),
        "ccaa": raw.get("comunidadAutonoma"),
        "postal_code": raw.get("postalCode"),
        "portal": raw.get("portalNumber"),
        "ref_catastral": raw.get("refCatastral"),
    }
    candidate.update({k: v for k, v in extras.items() if v not in (None, "")})
    return candidate


def geometry_of(raw: dict[str, Any]) -> Any | None:
    """The shapely geometry of a ``find`` answer (WKT ``geom`` or GeoJSON output), or None."""
    import shapely
    from shapely import wkt
    from shapely.geometry import shape

    if raw.get("type") == "FeatureCollection":
        features = raw.get("features") or []
        if not features or not features[0].get("geometry"):
            return None
        geometry = shape(features[0]["geometry"])
    else:
        text = raw.get("geom")
        if not text or not isinstance(text, str):
            return None
        geometry = wkt.loads(text)
    if geometry.is_empty:
        return None
    if not geometry.is_valid:
        geometry = shapely.make_valid(geometry)
    return geometry


def address_of(raw: dict[str, Any]) -> dict[str, Any]:
    """The Address fields of a ``find`` answer in either output format."""
    if raw.get("type") == "FeatureCollection":
        features = raw.get("features") or []
        return dict(features[0].get("properties") or {}) if features else {}
    return raw


class CartoCiudadClient:
    """Thin, cached httpx client of the geocoder API root (``CARTOCIUDAD_URL``)."""

    def __init__(self, base_url: str, timeout: float = 10.0, *, use_cache: bool = True) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.use_cache = use_cache
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
            follow_redirects=True,
        )

    def close(self) -> None:
        self._http.close()

    def _get(self, endpoint: str, params: dict[str, Any]) -> Any:
        params = {k: v for k, v in params.items() if v not in (None, "")}
        key = (self.base_url, endpoint, tuple(sorted((k, str(v)) for k, v in params.items())))
        if self.use_cache:
            cached = _CACHE.get(key, _MISSING)
            if cached is not _MISSING:
                return cached
        url = f"{self.base_url}/{endpoint}"
        try:
            response = self._http.get(url, params=params)
        except httpx.TimeoutException as exc:
            raise CartoCiudadUnavailable(
                f"CartoCiudad no respondió en {self.timeout:g} s. (EN: CartoCiudad timed out.)"
            ) from exc
        except httpx.HTTPError as exc:
            raise CartoCiudadUnavailable(
                f"No se pudo contactar con CartoCiudad ({type(exc).__name__}). "
                "(EN: CartoCiudad could not be reached.)"
            ) from exc
        if response.status_code == 400:
            raise ServiceError(f"CartoCiudad rechazó la petición (HTTP 400): {response.text[:200]}")
        if response.status_code >= 300:
            raise CartoCiudadUnavailable(
                f"CartoCiudad respondió con un error (HTTP {response.status_code})."
            )
        body = response.text.strip()
        if not body or body == "null":
            data: Any = None
        else:
            try:
                data = json.loads(body)
            except json.JSONDecodeError as exc:
                raise CartoCiudadUnavailable(
                    "CartoCiudad devolvió una respuesta que no es JSON. "
                    "(EN: invalid response from CartoCiudad.)"
                ) from exc
        if self.use_cache:
            _CACHE.set(key, data)
        return data

    def candidates(
        self, q: str, limit: int = 10, *, only_type: str | None = None
    ) -> list[dict[str, Any]]:
        """Autocomplete candidates for ``q`` (optionally only one type, via ``no_process``)."""
        params: dict[str, Any] = {"q": q, "limit": limit}
        if only_type in ALL_TYPES:
            params["no_process"] = ",".join(t for t in ALL_TYPES if t != only_type)
        data = self._get("candidates", params)
        if data is None:
            return []
        if not isinstance(data, list):
            raise CartoCiudadUnavailable(
                "CartoCiudad devolvió candidatos con un formato inesperado."
            )
        return [d for d in data if isinstance(d, dict)]

    def find(self, entity_id: str, entity_type: str, portal: int | None = None) -> dict | None:
        """The entity with its geometry (``geom`` WKT), or None when CartoCiudad has nothing."""
        data = self._get(
            "find", {"id": entity_id, "type": norm_type(entity_type), "portal": portal}
        )
        if not isinstance(data, dict) or not (data.get("id") or data.get("features")):
            return None
        return data

    def reverse(self, lat: float, lon: float) -> dict | None:
        """The nearest portal/PK within 350 m (README 1.3), or None."""
        data = self._get("reverseGeocode", {"lon": f"{lon:.7f}", "lat": f"{lat:.7f}"})
        if not isinstance(data, dict) or not data.get("id"):
            return None
        return data


_MISSING = object()
_CLIENTS: OrderedDict[tuple[str, float], CartoCiudadClient] = OrderedDict()
_CLIENTS_LOCK = threading.Lock()
_MAX_CLIENTS = 8


def client_for(settings: Settings) -> CartoCiudadClient:
    """A pooled client per (base URL, timeout), so connections are reused across calls."""
    key = (settings.cartociudad_url.rstrip("/"), float(settings.http_timeout))
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = CartoCiudadClient(key[0], key[1])
            _CLIENTS[key] = client
            while len(_CLIENTS) > _MAX_CLIENTS:
                _, old = _CLIENTS.popitem(last=False)
                old.close()
        _CLIENTS.move_to_end(key)
        return client


def clear_cache() -> None:
    """Forget cached answers (tests, or after changing CARTOCIUDAD_URL's data)."""
    _CACHE.clear()


def cache_info() -> dict[str, int]:
    return _CACHE.info()
