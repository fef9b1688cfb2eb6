"""GetCapabilities of WMS (1.3.0 / 1.1.1) and WMTS (1.0.0) services: their title and layers.

So that the model can add a layer that is not in the catalog: it lists the layers of a service
URL and then calls ``addLayer`` with a real layer name. The capabilities document is fetched
through the SSRF-guarded client (the URL comes from the conversation) and parsed by owslib from
those bytes (``WebMapService(url, xml=...)``), so owslib itself never opens a connection.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from ..config import Settings
from ..errors import ServiceError, ToolError
from .cache import TTLCache
from .ssrf import guarded_client

log = logging.getLogger(__name__)

MAX_LAYERS = 200
"""Layers listed in one answer (a model reads the list; big services are cut, and say so)."""

_CACHE: TTLCache[dict[str, Any]] = TTLCache(maxsize=64, ttl=3600)
_OWS_KEYS = {"service", "request", "version", "acceptversions"}


def capabilities_url(url: str, service: str) -> str:
    """``url`` with SERVICE/REQUEST/VERSION for GetCapabilities (other parameters kept)."""
    parts = urlsplit(url.strip())
    query = [(k, v) for k, v in parse_qsl(parts.query) if k.lower() not in _OWS_KEYS]
    version = "1.3.0" if service == "WMS" else "1.0.0"
    query += [("SERVICE", service), ("REQUEST", "GetCapabilities"), ("VERSION", version)]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def base_url(url: str) -> str:
    """The service URL without OGC request parameters (what ``addLayer`` wants)."""
    parts = urlsplit(url.strip())
    query = [(k, v) for k, v in parse_qsl(parts.query) if k.lower() not in _OWS_KEYS]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def guess_service(url: str) -> str:
    low = url.lower()
    return "WMTS" if "wmts" in low or "service=wmts" in low else "WMS"


def _root_tag(content: bytes) -> str:
    import io

    from lxml import etree

    try:
        for _event, element in etree.iterparse(
            io.BytesIO(content), events=("start",), resolve_entities=False, no_network=True
        ):
            return etree.QName(element).localname
    except etree.XMLSyntaxError as exc:
        raise ServiceError(f"La respuesta no es XML válido ({exc.msg}).") from exc
    return ""


def _exception_text(content: bytes) -> str:
    from lxml import etree

    try:
        root = etree.fromstring(content, parser=etree.XMLParser(resolve_entities=False))
    except etree.XMLSyntaxError:
        return ""
    return " ".join(t.strip() for t in root.itertext() if t.strip())[:300]


def fetch_bytes(url: str, settings: Settings, client: httpx.Client | None = None) -> bytes:
    """GET ``url`` through the SSRF guard with the size cap; ServiceError on any failure."""
    own = client is None
    client = client or guarded_client(settings)
    limit = settings.fetch_max_bytes
    try:
        with client.stream("GET", url) as response:
            if response.status_code >= 400:
                raise ServiceError(
                    f"El servicio respondió HTTP {response.status_code} a GetCapabilities."
                )
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit:
                    raise ServiceError(
                        f"Las capacidades del servicio superan el límite de {limit} bytes "
                        "(IDEE_FETCH_MAX_BYTES)."
                    )
                chunks.append(chunk)
            return b"".join(chunks)
    except httpx.TimeoutException as exc:
        raise ServiceError(
            f"El servicio no respondió a tiempo ({settings.http_timeout:g} s). Reintenta más tarde."
        ) from exc
    except httpx.HTTPError as exc:
        raise ServiceError(f"No se pudo contactar con el servicio ({type(exc).__name__}).") from exc
    finally:
        if own:
            client.close()


def _parse_wms(url: str, content: bytes, version: str) -> dict[str, Any]:
    from owslib.wms import WebMapService

    wms = WebMapService(url, version=version, xml=content)
    layers = []
    for name, layer in wms.contents.items():
        layers.append(
            {
                "name": name,
                "title": layer.title or name,
                "abstract": (layer.abstract or "")[:300],
            }
        )
    try:
        formats = list(wms.getOperationByName("GetMap").formatOptions)
    except (KeyError, AttributeError):
        formats = []
    return {
        "type": "WMS",
        "version": version,
        "title": wms.identification.title or "",
        "abstract": (wms.identification.abstract or "")[:500],
        "formats": formats,
        "layers": layers,
    }


def _parse_wmts(url: str, content: bytes) -> dict[str, Any]:
    from owslib.wmts import WebMapTileService

    wmts = WebMapTileService(url, version="1.0.0", xml=content)
    layers = []
    for name, layer in wmts.contents.items():
        layers.append(
            {
                "name": name,
                "title": layer.title or name,
                "abstract": (layer.abstract or "")[:300],
                "formats": list(layer.formats or []),
                "matrixSets": list(layer.tilematrixsetlinks or []),
            }
        )
    return {
        "type": "WMTS",
        "version": "1.0.0",
        "title": wmts.identification.title or "",
        "abstract": (wmts.identification.abstract or "")[:500],
        "layers": layers,
    }


def parse_capabilities(url: str, content: bytes) -> dict[str, Any]:
    """Service title and layers from a capabilities document, whatever OGC kind it is."""
    root = _root_tag(content)
    try:
        if root == "WMS_Capabilities":
            return _parse_wms(url, content, "1.3.0")
        if root == "WMT_MS_Capabilities":
            return _parse_wms(url, content, "1.1.1")
        if root == "Capabilities":
            return _parse_wmts(url, content)
    except ServiceError:
        raise
    except Exception as exc:  # owslib raises many kinds on malformed documents
        log.info("owslib no pudo leer las capacidades de %s: %s", url, exc)
        raise ServiceError(f"No se pudieron leer las capacidades del servicio ({exc}).") from exc
    if root in ("ServiceExceptionReport", "ExceptionReport"):
        raise ServiceError(f"El servicio devolvió un error: {_exception_text(content)}")
    raise ServiceError(
        f"La respuesta no es un documento de capacidades WMS/WMTS (raíz '{root or '?'}')."
    )


def describe_service(
    url: str, settings: Settings, service: str | None = None, *, use_cache: bool = True
) -> dict[str, Any]:
    """``{"success", "url", "type", "title", "layers": [{"name", "title", "abstract"}]}``."""
    url = (url or "").strip()
    if not url:
        raise ToolError("Falta la URL del servicio.")
    kind = (service or "").upper() or guess_service(url)
    if kind not in ("WMS", "WMTS"):
        raise ToolError(
            f"Solo se pueden listar capas de servicios WMS o WMTS (pedido: {service}). "
            "(EN: only WMS/WMTS capabilities are supported.)"
        )
    key = (base_url(url), kind)
    if use_cache:
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
    with guarded_client(settings) as client:
        content = fetch_bytes(capabilities_url(url, kind), settings, client)
        try:
            info = parse_capabilities(url, content)
        except ServiceError:
            if service:  # the caller said which: do not guess further
                raise
            other = "WMTS" if kind == "WMS" else "WMS"
            content = fetch_bytes(capabilities_url(url, other), settings, client)
            info = parse_capabilities(url, content)
    layers = info.pop("layers")
    result = {
        "success": True,
        "url": base_url(url),
        **info,
        "layer_count": len(layers),
        "layers": layers[:MAX_LAYERS],
    }
    if len(layers) > MAX_LAYERS:
        result["truncated"] = True
    if use_cache:
        _CACHE.set(key, result)
    return result


def clear_cache() -> None:
    _CACHE.clear()


def cache_info() -> dict[str, int]:
    return _CACHE.info()
