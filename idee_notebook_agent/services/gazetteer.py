"""Offline gazetteer of Spain: 8,132 municipalities, 52 provinces, 19 autonomous communities.

It lets ``geocodePlace`` answer municipality/province/community names when CartoCiudad cannot be
reached (and fills coordinates CartoCiudad leaves empty). Data: ``services/data/*.csv`` from the
IGN/CNIG register NGMEP 2024 (CC BY 4.0, see the data README). Points are the capital
settlement's, not centroids; municipal bounding boxes are estimates from the area.
"""

from __future__ import annotations

import csv
import io
import math
import threading
from dataclasses import dataclass
from importlib import resources
from typing import Any

from .textnorm import fold, words

MUNICIPIO = "municipio"
PROVINCIA = "provincia"
CCAA = "comunidad autonoma"
KINDS = (MUNICIPIO, PROVINCIA, CCAA)
_KIND_ORDER = {MUNICIPIO: 0, PROVINCIA: 1, CCAA: 2}

ATTRIBUTION = "© Instituto Geográfico Nacional (IGN) / CNIG – NGMEP 2024, CC BY 4.0"

# Leading articles in Spanish, Catalan/Valencian, Galician and Balearic names ("A Coruña",
# "l'Alfàs del Pi", "es Migjorn Gran"): names match with or without them.
_ARTICLES_TEXT = "el la los las lo l a o os as es sa ses s els les en na"
ARTICLES = frozenset(_ARTICLES_TEXT.split())

# Common Spanish exonyms that are not official names (the register has only official ones).
EXONYMS: dict[str, list[str]] = {
    "lerida": ["Lleida"],
    "gerona": ["Girona"],
    "orense": ["Ourense"],
    "la coruna": ["A Coruña"],
    "palma de mallorca": ["Palma"],
    "mahon": ["Maó"],
    "ibiza": ["Eivissa"],
    "vitoria": ["Vitoria-Gasteiz"],
    "gasteiz": ["Vitoria-Gasteiz"],
    "castellon": ["Castelló de la Plana", "Castelló/Castellón"],
    "castellon de la plana": ["Castelló de la Plana"],
    "sangenjo": ["Sanxenxo"],
    "xixon": ["Gijón"],
    "rioja": ["La Rioja"],
}

_TYPE_PREFIXES = (
    "termino municipal de ",
    "ayuntamiento de ",
    "municipio de ",
    "provincia de ",
    "comunidad autonoma de ",
)

_PAD_DEG = 0.05  # settlements' extent → territory: about 5 km on each side


@dataclass(frozen=True)
class Place:
    """One municipality, province or community."""

    kind: str
    code: str
    name: str
    alt: tuple[str, ...]
    lat: float
    lon: float
    province: str | None
    province_code: str | None
    ccaa: str | None
    bbox: tuple[float, float, float, float] | None
    bbox_approx: bool
    population: int = 0

    def candidate(self) -> dict[str, Any]:
        """The agreed ``geocodePlace`` candidate shape."""
        address = f"{self.name}, {self.province}" if self.kind == MUNICIPIO else self.name
        return {
            "id": self.code,
            "type": self.kind,
            "name": self.name,
            "address": address,
            "lat": round(self.lat, 6),
            "lon": round(self.lon, 6),
            "muni": self.name if self.kind == MUNICIPIO else None,
            "province": self.province,
            "bbox": [round(v, 5) for v in self.bbox] if self.bbox else None,
            "bbox_approx": self.bbox_approx,
            "ine_code": self.code,
            "ccaa": self.ccaa,
        }


def name_keys(name: str) -> set[str]:
    """Comparable keys of a place name: folded, each bilingual part, with and without article."""
    keys: set[str] = set()
    for part in [name, *name.split("/")]:
        ws = words(part)
        if not ws:
            continue
        keys.add(" ".join(ws))
        if len(ws) > 1 and ws[0] in ARTICLES:
            keys.add(" ".join(ws[1:]))
    return keys


def query_keys(text: str) -> set[str]:
    """Keys of a user's phrase: strips 'municipio de', 'Coruña, A' order, exonyms."""
    text = (text or "").strip()
    low = fold(text)
    for prefix in _TYPE_PREFIXES:
        if low.startswith(prefix):
            text = text[len(prefix) :]
            break
    if "," in text:
        head, _, tail = text.rpartition(",")
        if fold(tail).strip() in ARTICLES:  # INE order "Coruña, A"
            text = f"{tail.strip()} {head.strip()}"
    keys = name_keys(text)
    for key in list(keys):
        for official in EXONYMS.get(key, []):
            keys |= name_keys(official)
    return keys


def _approx_bbox(lat: float, lon: float, area_ha: float) -> tuple[float, float, float, float]:
    half_m = math.sqrt(max(area_ha, 1.0) * 10_000) / 2 * 1.25
    dlat = half_m / 111_320
    dlon = half_m / (111_320 * max(math.cos(math.radians(lat)), 0.2))
    return (lon - dlon, lat - dlat, lon + dlon, lat + dlat)


def _padded(row: dict[str, str]) -> tuple[float, float, float, float]:
    return (
        float(row["minlon"]) - _PAD_DEG,
        float(row["minlat"]) - _PAD_DEG,
        float(row["maxlon"]) + _PAD_DEG,
        float(row["maxlat"]) + _PAD_DEG,
    )


def _alt(value: str) -> tuple[str, ...]:
    return tuple(p for p in (value or "").split("|") if p)


def _read(name: str) -> list[dict[str, str]]:
    text = (
        resources.files("idee_notebook_agent.services")
        .joinpath(f"data/{name}")
        .read_text(encoding="utf-8")
    )
    return list(csv.DictReader(io.StringIO(text)))


class Gazetteer:
    """Name and code look-ups over the packaged register. Read-only after loading."""

    def __init__(self, places: list[Place]) -> None:
        self.places = places
        self._by_code: dict[tuple[str, str], Place] = {(p.kind, p.code): p for p in places}
        self._index: dict[str, list[Place]] = {}
        for place in places:
            for key in {k for n in (place.name, *place.alt) for k in name_keys(n)}:
                self._index.setdefault(key, []).append(place)
        self._keys = list(self._index)
        self._munis = [p for p in places if p.kind == MUNICIPIO]

    @classmethod
    def load(cls) -> Gazetteer:
        ccaa_rows = _read("ccaa.csv")
        ccaa_names = {r["ccaa_code"]: r["ccaa"] for r in ccaa_rows}
        prov_rows = _read("provincias.csv")
        provinces = {r["province_code"]: r for r in prov_rows}
        places: list[Place] = []
        for r in _read("municipios.csv"):
            prov = provinces.get(r["province_code"], {})
            lat, lon = float(r["lat"]), float(r["lon"])
            places.append(
                Place(
                    kind=MUNICIPIO,
                    code=r["ine_code"],
                    name=r["name"],
                    alt=_alt(r["name_alt"]),
                    lat=lat,
                    lon=lon,
                    province=prov.get("province"),
                    province_code=r["province_code"],
                    ccaa=ccaa_names.get(prov.get("ccaa_code", "")),
                    bbox=_approx_bbox(lat, lon, float(r["area_ha"] or 0)),
                    bbox_approx=True,
                    population=int(r["population"] or 0),
                )
            )
        for r in prov_rows:
            places.append(
                Place(
                    kind=PROVINCIA,
                    code=r["province_code"],
                    name=r["province"],
                    alt=_alt(r["name_alt"]),
                    lat=float(r["centroid_lat"]),
                    lon=float(r["centroid_lon"]),
                    province=r["province"],
                    province_code=r["province_code"],
                    ccaa=ccaa_names.get(r["ccaa_code"]),
                    bbox=_padded(r),
                    bbox_approx=True,
                )
            )
        for r in ccaa_rows:
            places.append(
                Place(
                    kind=CCAA,
                    code=r["ccaa_code"],
                    name=r["ccaa"],
                    alt=_alt(r["name_alt"]),
                    lat=float(r["centroid_lat"]),
                    lon=float(r["centroid_lon"]),
                    province=None,
                    province_code=None,
                    ccaa=r["ccaa"],
                    bbox=_padded(r),
                    bbox_approx=True,
                )
            )
        return cls(places)

    def by_code(self, code: str, kind: str | None = None) -> Place | None:
        code = (code or "").strip()
        kinds = [kind] if kind else [MUNICIPIO if len(code) == 5 else PROVINCIA, CCAA]
        for k in kinds:
            place = self._by_code.get((k, code))
            if place is not None:
                return place
        return None

    def lookup(self, text: str, kind: str | None = None, limit: int = 5) -> list[Place]:
        """Places named ``text`` (accents, case, articles and typos tolerated), best first."""
        keys = query_keys(text)
        scored: dict[tuple[str, str], tuple[float, Place]] = {}
        for key in keys:
            for place in self._index.get(key, []):
                scored[(place.kind, place.code)] = (100.0, place)
        if not scored:  # "Villanueva" → "Villanueva de la Serena", ... (biggest first)
            for key in keys:
                prefix = key + " "
                for match in self._keys:
                    if match.startswith(prefix):
                        for place in self._index[match]:
                            scored[(place.kind, place.code)] = (90.0, place)
        if not scored and keys:
            from rapidfuzz import fuzz, process

            for key in keys:
                for match, score, _ in process.extract(
                    key, self._keys, scorer=fuzz.ratio, limit=5, score_cutoff=85
                ):
                    for place in self._index[match]:
                        prev = scored.get((place.kind, place.code))
                        if prev is None or prev[0] < score:
                            scored[(place.kind, place.code)] = (float(score), place)
        items = [sp for sp in scored.values() if kind is None or sp[1].kind == kind]
        items.sort(key=lambda sp: (-sp[0], _KIND_ORDER[sp[1].kind], -sp[1].population))
        return [p for _, p in items[:limit]]

    def nearest_municipality(self, lat: float, lon: float) -> tuple[Place, float]:
        """The municipality whose capital point is nearest, and its distance in km."""
        coslat = math.cos(math.radians(lat))
        best = min(self._munis, key=lambda p: (p.lat - lat) ** 2 + ((p.lon - lon) * coslat) ** 2)
        return best, _haversine_km(lat, lon, best.lat, best.lon)


def _haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6371.0 * math.asin(math.sqrt(a))


_GAZETTEER: Gazetteer | None = None
_LOCK = threading.Lock()


def get_gazetteer() -> Gazetteer:
    """The packaged gazetteer, loaded once on first use (about 0.1 s; a read-only cache)."""
    global _GAZETTEER
    with _LOCK:
        if _GAZETTEER is None:
            _GAZETTEER = Gazetteer.load()
        return _GAZETTEER


__all__ = ["ATTRIBUTION", "CCAA", "MUNICIPIO", "PROVINCIA", "Gazetteer", "Place", "get_gazetteer"]
