"""``searchIdeeService``: find official map services in the IDEE catalogue, by topic.

The IDEE catalogue is GeoNetwork (``IDEE_CATALOG_URL``, default the INSPIRE catalogue
``https://www.idee.es/csw-inspire-idee/srv/spa``). Like the API-IDEE layer switcher, it is asked
through its ``q`` JSON search (shared/data/cartociudad/README.md section 4), here once per
service category (WMS, WMTS, WFS, OGC API Features, raster tiles, vector tiles) in parallel, each
with its own timeout, so a slow category does not hold the answer back. When the ``q`` search is
missing (newer GeoNetwork), one CSW 2.0.2 GetRecords query is the fallback. Matching entries of
the local catalog are added first, with their exact layer names.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

import httpx

from ..config import Settings
from .catalog import get_catalog
from .ssrf import USER_AGENT

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Category:
    key: str
    label: str
    keyword: str
    layer_type: str


CATEGORIES: tuple[Category, ...] = (
    Category("WMS", "Servicios de visualización (WMS)", "WMS or Web Map Service", "WMS"),
    Category("WMTS", "Servicios de teselas (WMTS)", "WMTS or Web Map Tile Service", "WMTS"),
    Category("WFS", "Servicios de descarga (WFS)", "WFS or Web Feature Service", "WFS"),
    Category("OGCAPI", "OGC API Features", "OGC API Features or OGC API", "OGCAPIFeatures"),
    Category("TMS", "Teselas ráster (TMS/XYZ)", "TMS or XYZ", "TMS"),
    Category("MVT", "Teselas vectoriales (MVT)", "MVT or Vector Tiles", "MVT"),
)

CATALOG_SOURCE = "catálogo local (IGN/IDEE)"
IDEE_SOURCE = "catálogo IDEE"

CSW_NS = {
    "csw": "http://www.opengis.net/cat/csw/2.0.2",
    "dc": "http://purl.org/dc/elements/1.1/",
    "dct": "http://purl.org/dc/terms/",
}
CSW_TEMPLATE = """<?xml version="1.0" encoding="UTF-8"?>
<csw:GetRecords xmlns:csw="http://www.opengis.net/cat/csw/2.0.2" xmlns:ogc="http://www.opengis.net/ogc"
    service="CSW" version="2.0.2" resultType="results" startPosition="1" maxRecords="{limit}"
    outputSchema="http://www.opengis.net/cat/csw/2.0.2" outputFormat="application/xml">
  <csw:Query typeNames="csw:Record">
    <csw:ElementSetName>full</csw:ElementSetName>
    <csw:Constraint version="1.1.0">
      <ogc:Filter>
        <ogc:PropertyIsLike wildCard="*" singleChar="?" escapeChar="\\">
          <ogc:PropertyName>AnyText</ogc:PropertyName>
          <ogc:Literal>*{text}*</ogc:Literal>
        </ogc:PropertyIsLike>
      </ogc:Filter>
    </csw:Constraint>
  </csw:Query>
</csw:GetRecords>"""


class _NoQSearch(Exception):
    """The catalogue has no GeoNetwork ``q`` search (HTTP 404/405 or not JSON)."""


def layer_type_of(protocol: str, url: str = "") -> str | None:
    """addLayer type from a link protocol (OGC:WMS...) or, failing that, the URL."""
    text = f"{protocol} ".upper()
    for needle, kind in (
        ("WMTS", "WMTS"),
        ("WMS", "WMS"),
        ("WFS", "WFS"),
        ("API FEATURES", "OGCAPIFeatures"),
        ("API-FEATURES", "OGCAPIFeatures"),
        ("OGCAPI", "OGCAPIFeatures"),
        ("OAPIF", "OGCAPIFeatures"),
        ("MVT", "MVT"),
        ("VECTOR TILE", "MVT"),
        ("TMS", "TMS"),
        ("XYZ", "TMS"),
    ):
        if needle in text:
            return kind
    low = url.lower()
    if "wmts" in low:
        return "WMTS"
    if "wfs" in low:
        return "WFS"
    if "wms" in low:
        return "WMS"
    if "/collections" in low or "api-features" in low:
        return "OGCAPIFeatures"
    if "{z}" in low:
        return "MVT" if ".pbf" in low else "TMS"
    return None


def _service_url(part: str) -> str:
    """The service URL of a link part: everything from ``?`` on removed (API-IDEE's rule)."""
    match = re.search(r"https?://\S+", part)
    url = match.group(0) if match else part
    return url.split("?", 1)[0]


def parse_q_records(data: Any, category: Category) -> list[dict[str, Any]]:
    """Services from a GeoNetwork ``q`` JSON answer (``metadata`` object or list, ``link``s)."""
    if not isinstance(data, dict):
        raise ValueError("respuesta JSON inesperada")
    records = data.get("metadata") or []
    if isinstance(records, dict):
        records = [records]
    services: list[dict[str, Any]] = []
    for record in records:
        if not isinstance(record, dict):
            continue
        title = str(record.get("title") or record.get("defaultTitle") or "").strip()
        abstract = record.get("abstract") or record.get("defaultAbstract") or ""
        links = record.get("link") or []
        if isinstance(links, str):
            links = [links]
        by_url: dict[tuple[str, str], dict[str, Any]] = {}
        for link in links:
            parts = [p.strip() for p in str(link).split("|")]
            index = next(
                (i for i, p in enumerate(parts) if "http://" in p or "https://" in p), None
            )
            if index is None:
                continue
            url = _service_url(parts[index])
            protocol = next((p for p in parts[index + 1 :] if p), "")
            kind = layer_type_of(protocol, parts[index]) or category.layer_type
            entry = by_url.setdefault(
                (url, kind),
                {
                    "title": title,
                    "type": kind,
                    "url": url,
                    "layers": [],
                    "abstract": str(abstract)[:400],
                    "source": IDEE_SOURCE,
                    "category": category.label,
                },
            )
            layer = parts[0] if index > 0 else ""
            if layer and layer not in entry["layers"]:
                entry["layers"].append(layer)
        services.extend(by_url.values())
    return services


def parse_csw_records(content: bytes) -> list[dict[str, Any]]:
    """Services from a CSW 2.0.2 GetRecords answer (Dublin Core records)."""
    from lxml import etree

    root = etree.fromstring(content, parser=etree.XMLParser(resolve_entities=False))
    services: list[dict[str, Any]] = []
    for record in root.iter(*(f"{{{CSW_NS['csw']}}}{n}" for n in ("Record", "SummaryRecord"))):
        title = (record.findtext("dc:title", default="", namespaces=CSW_NS) or "").strip()
        abstract = record.findtext("dct:abstract", default="", namespaces=CSW_NS) or ""
        for ref in record.findall("dct:references", namespaces=CSW_NS):
            href = (ref.text or "").strip()
            if not href.startswith(("http://", "https://")):
                continue
            kind = layer_type_of(ref.get("scheme") or "", href)
            if kind is None:
                continue
            services.append(
                {
                    "title": title,
                    "type": kind,
                    "url": href.split("?", 1)[0],
                    "layers": [],
                    "abstract": abstract.strip()[:400],
                    "source": IDEE_SOURCE + " (CSW)",
                }
            )
    return services


async def _query_category(
    client: httpx.AsyncClient, base: str, category: Category, query: str, limit: int
) -> list[dict[str, Any]]:
    params = {
        "_content_type": "json",
        "bucket": "s101",
        "facet.q": "type/service",
        "fast": "index",
        "from": 1,
        "to": limit,
        "keyword": category.keyword,
        "resultType": "details",
        "sortBy": "relevance",
        "any": query,
    }
    response = await client.get(f"{base}/q", params=params)
    if response.status_code in (404, 405, 501):
        raise _NoQSearch(f"HTTP {response.status_code}")
    response.raise_for_status()
    try:
        data = response.json()
    except (json.JSONDecodeError, ValueError) as exc:
        raise _NoQSearch("no es JSON") from exc
    return parse_q_records(data, category)


async def _query_csw(
    client: httpx.AsyncClient, base: str, query: str, limit: int
) -> list[dict[str, Any]]:
    body = CSW_TEMPLATE.format(limit=limit, text=escape(query.replace("*", " ")))
    response = await client.post(
        f"{base}/csw", content=body.encode("utf-8"), headers={"Content-Type": "application/xml"}
    )
    response.raise_for_status()
    return parse_csw_records(response.content)


def _error_text(category: str, exc: BaseException, timeout: float) -> str:
    if isinstance(exc, (asyncio.TimeoutError, httpx.TimeoutException)):
        return f"{category}: el catálogo no respondió en {timeout:g} s."
    if isinstance(exc, httpx.HTTPStatusError):
        return f"{category}: el catálogo respondió HTTP {exc.response.status_code}."
    if isinstance(exc, httpx.HTTPError):
        return f"{category}: no se pudo contactar con el catálogo ({type(exc).__name__})."
    return f"{category}: respuesta no válida del catálogo ({exc})."


def catalog_services(query: str, limit: int = 3, layer_type: str | None = None) -> list[dict]:
    """Matching entries of the local catalog in the service-result shape."""
    out = []
    for entry, score in get_catalog().search(query, limit=limit + 3):
        if score < 80 or (layer_type and entry.type != layer_type.upper()):
            continue
        out.append(
            {
                "title": entry.title_es,
                "type": entry.type,
                "url": entry.url,
                "layers": [entry.layer] if entry.layer else [],
                "abstract": entry.title_en,
                "source": CATALOG_SOURCE,
                "catalog_id": entry.id,
            }
        )
    return out[:limit]


def _merge(services: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for service in services:
        key = (service["url"].rstrip("?/").lower(), service["type"])
        if key in merged:
            known = merged[key]["layers"]
            known.extend(x for x in service["layers"] if x not in known)
        else:
            merged[key] = {**service, "layers": list(service["layers"])}
    return list(merged.values())


async def search_services(
    query: str, settings: Settings, *, layer_type: str | None = None, limit: int = 10
) -> dict[str, Any]:
    """The agreed ``searchIdeeService`` result for a topic (see the module docstring)."""
    query = (query or "").strip()
    base = settings.idee_catalog_url.rstrip("/")
    timeout = float(settings.http_timeout)
    wanted = (layer_type or "").upper()
    categories = [c for c in CATEGORIES if not wanted or c.layer_type.upper() == wanted]
    local = catalog_services(query, 3, wanted or None)
    errors: list[str] = []
    found: list[dict[str, Any]] = []
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
        headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
        follow_redirects=True,
    ) as client:
        results = await asyncio.gather(
            *(
                asyncio.wait_for(_query_category(client, base, c, query, limit), timeout)
                for c in categories
            ),
            return_exceptions=True,
        )
        missing_q = 0
        for category, outcome in zip(categories, results, strict=True):
            if isinstance(outcome, BaseException):
                if isinstance(outcome, asyncio.CancelledError):
                    raise outcome
                if isinstance(outcome, _NoQSearch):
                    missing_q += 1
                else:
                    errors.append(_error_text(category.label, outcome, timeout))
                    log.info("Categoría %s del catálogo IDEE falló: %r", category.key, outcome)
            else:
                found.extend(outcome)
        if missing_q and missing_q == len(categories):
            try:
                csw = await asyncio.wait_for(_query_csw(client, base, query, limit), timeout)
                found.extend(s for s in csw if not wanted or s["type"].upper() == wanted)
            except Exception as exc:
                errors.append(_error_text("CSW", exc, timeout))
        elif missing_q:
            errors.append(f"{missing_q} categorías: el catálogo no ofrece la búsqueda 'q'.")
    services = _merge(local + found)
    if not services and errors:
        return {
            "success": False,
            "query": query,
            "error": "No se pudo consultar el catálogo de la IDEE: "
            + " ".join(errors)
            + " Reintenta más tarde o indica la URL del servicio.",
            "services": [],
            "errors": errors,
        }
    result: dict[str, Any] = {
        "success": True,
        "query": query,
        "services": services[: limit + len(local)],
        "errors": errors,
    }
    if not services:
        result["message"] = f"No se encontraron servicios para '{query}'."
    return result


__all__ = ["CATEGORIES", "catalog_services", "parse_q_records", "search_services"]
