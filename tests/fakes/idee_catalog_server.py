"""A loopback IDEE catalogue (GeoNetwork): the ``q`` JSON search and CSW 2.0.2 GetRecords.

Shapes follow shared/data/cartociudad/idee_catalog/ (``summary['@count']``, ``metadata`` as an
object or a list, ``link`` strings "layer|title|url|protocol|mime"; csw:Record with
dct:references). The records are ILLUSTRATIVE. Knobs: ``slow`` ({"MVT": 3.0} delays that
category), ``fail`` ({"WFS": 500}), ``q_enabled`` (False: ``/q`` answers 404, as on a
GeoNetwork without it, so clients fall back to CSW).
"""

from __future__ import annotations

import json
import re
import time
import unicodedata
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from tests.fakes.cartociudad_server import LoopbackHTTPServer, Reply

DATA = Path(__file__).parent / "idee_catalog_data"
BASE = "/csw-inspire-idee/srv/spa"


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text or "")
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def _record(title: str, kind: str, url: str, layers: list[str], keywords: list[str]) -> dict:
    protocol = {
        "WMS": "OGC:WMS",
        "WMTS": "OGC:WMTS",
        "WFS": "OGC:WFS",
        "OGCAPI": "OGC API Features",
        "TMS": "TMS",
        "MVT": "MVT",
    }[kind]
    links = [f"{layer}|{layer}|{url}|{protocol}|" for layer in layers] or [f"||{url}|{protocol}|"]
    return {
        "title": title,
        "defaultTitle": title,
        "abstract": f"{title} (ILLUSTRATIVE).",
        "keyword": keywords,
        "link": links if len(links) > 1 else links[0],
        "_kind": kind,
    }


def default_records() -> list[dict[str, Any]]:
    sample = json.loads((DATA / "geonetwork_q_json_response.ILLUSTRATIVE.json").read_text())
    records = []
    for rec, kind, words in zip(
        sample["metadata"],
        ("WMS", "WMTS"),
        (["unidades administrativas", "límites"], ["ortoimágenes", "ortofoto", "pnoa"]),
        strict=True,
    ):
        records.append({**rec, "abstract": rec["title"], "keyword": words, "_kind": kind})
    records += [
        _record(
            "Servicio WMS de Hidrografía",
            "WMS",
            "https://servicios.idee.es/wms-inspire/hidrografia?request=GetCapabilities&service=WMS",
            ["HY.PhysicalWaters.Waterbodies", "HY.PhysicalWaters.Catchments"],
            ["hidrografía", "ríos", "agua"],
        ),
        _record(
            "Servicio WFS de Hidrografía",
            "WFS",
            "https://servicios.idee.es/wfs-inspire/hidrografia?",
            ["HY.PhysicalWaters.Waterbodies"],
            ["hidrografía", "descarga"],
        ),
        _record(
            "API Features de Hidrografía",
            "OGCAPI",
            "https://api-features.idee.es/collections/hidrografia/items",
            [],
            ["hidrografía", "ogc api"],
        ),
        _record(
            "Teselas vectoriales de hidrografía",
            "MVT",
            "https://vt-hidrografia.idee.es/1.0.0/hidrografia/{z}/{x}/{y}.pbf",
            [],
            ["hidrografía", "teselas vectoriales"],
        ),
        _record(
            "Teselas ráster del relieve",
            "TMS",
            "https://tms-relieve.idee.es/1.0.0/relieve/{z}/{x}/{-y}.jpeg",
            [],
            ["relieve", "sombreado"],
        ),
        _record(
            "Servicio WMS de Redes de Transporte",
            "WMS",
            "https://servicios.idee.es/wms-inspire/transportes?",
            ["TN.RoadTransportNetwork.RoadLink", "TN.RailTransportNetwork.RailwayLink"],
            ["transporte", "carreteras", "ferrocarril"],
        ),
    ]
    return records


_KEYWORD_KIND = {"WMS": "WMS", "WMTS": "WMTS", "WFS": "WFS", "OGC": "OGCAPI", "TMS": "TMS"}


def _kind_of_keyword(keyword: str) -> str | None:
    first = (keyword.split() or [""])[0].upper()
    if first.startswith("MVT"):
        return "MVT"
    return _KEYWORD_KIND.get(first)


class IdeeCatalogFake(LoopbackHTTPServer):
    """``fake.url`` is the catalogue root to give to ``IDEE_CATALOG_URL``."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__(delay)
        self.records = default_records()
        self.slow: dict[str, float] = {}
        self.fail: dict[str, int] = {}
        self.q_enabled = True

    @property
    def url(self) -> str:
        return self.root + BASE

    def matching(self, text: str, kind: str | None = None) -> list[dict[str, Any]]:
        words = _fold(text).split()
        out = []
        for rec in self.records:
            if kind and rec["_kind"] != kind:
                continue
            hay = _fold(" ".join([rec["title"], rec.get("abstract", ""), *rec.get("keyword", [])]))
            if all(w in hay for w in words):
                out.append(rec)
        return out

    def route(
        self, method: str, path: str, params: dict[str, str], body: bytes, handler: Any
    ) -> Reply:
        if path == BASE + "/q":
            if not self.q_enabled:
                return Reply(404, "<html>Not Found</html>", "text/html")
            kind = _kind_of_keyword(params.get("keyword", ""))
            if kind in self.slow:
                time.sleep(self.slow[kind])
            if kind in self.fail:
                return Reply(self.fail[kind], {"error": "fallo simulado"})
            start, end = int(params.get("from", 1)), int(params.get("to", 9))
            found = self.matching(params.get("any", ""), kind)[start - 1 : end]
            public = [{k: v for k, v in r.items() if not k.startswith("_")} for r in found]
            metadata: Any = public[0] if len(public) == 1 else public
            return Reply(200, {"summary": {"@count": str(len(public))}, "metadata": metadata})
        if path == BASE + "/csw" and method == "POST":
            match = re.search(rb"<ogc:Literal>\*?(.*?)\*?</ogc:Literal>", body)
            text = match.group(1).decode("utf-8") if match else ""
            return Reply(200, self.csw_response(self.matching(text)), "application/xml")
        return Reply(404, {"error": "not found"})

    def csw_response(self, records: list[dict[str, Any]]) -> str:
        items = []
        for rec in records:
            links = rec["link"] if isinstance(rec["link"], list) else [rec["link"]]
            refs = []
            for link in links:
                parts = link.split("|")
                url = next(p for p in parts if p.startswith("http"))
                scheme = parts[parts.index(url) + 1] if parts.index(url) + 1 < len(parts) else ""
                refs.append(
                    f'<dct:references scheme="{escape(scheme)}">{escape(url)}</dct:references>'
                )
            items.append(
                "<csw:Record>"
                f"<dc:title>{escape(rec['title'])}</dc:title><dc:type>service</dc:type>"
                f"<dct:abstract>{escape(rec.get('abstract', ''))}</dct:abstract>"
                + "".join(refs)
                + "</csw:Record>"
            )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<csw:GetRecordsResponse xmlns:csw="http://www.opengis.net/cat/csw/2.0.2" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dct="http://purl.org/dc/terms/">'
            '<csw:SearchStatus timestamp="2025-01-01T00:00:00"/>'
            f'<csw:SearchResults numberOfRecordsMatched="{len(items)}" '
            f'numberOfRecordsReturned="{len(items)}" elementSet="full" nextRecord="0">'
            + "".join(items)
            + "</csw:SearchResults></csw:GetRecordsResponse>"
        )
