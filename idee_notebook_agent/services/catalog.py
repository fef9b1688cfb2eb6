"""The layer catalog: well-known Spanish national layers by id, title or a loose phrase.

So that "carga la capa Mapa Base de España – IGNBaseGris", "pon el mapa base gris" or "add the
cadastre" become a full, correct layer definition without the model inventing URLs. Data:
``services/data/catalog.json`` (built from the project's cited facts, see its README).

Public helpers for the planner and MCP: ``search(text, limit)`` → ``[(entry, score)]`` and
``resolve(text)`` → entry, or ``ToolError`` with ``candidates`` when ambiguous or unknown.
``complete_add_layer(args)`` is what the ``addLayer`` preprocessor runs.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from ..errors import ToolError
from .textnorm import compact, words

log = logging.getLogger(__name__)

MIN_SCORE = 60.0
"""Below this the best match is not trusted: the caller gets suggestions instead."""
AMBIGUITY_MARGIN = 6.0
"""Two different layers scoring within this margin are ambiguous: the user is asked."""
EXACT_BONUS = 5.0
SOURCE_TITLE_FACTOR = 0.92

LAYER_TYPES = ("WMS", "WMTS", "TMS", "XYZ", "MVT")

_STOPWORDS_TEXT = (
    "de del la el los las lo le un una unos unas y e o u en a al con para por que "
    "the of an and in on to for with my me "
    "capa capas layer layers carga cargar cargame pon poner ponme anade anadir anademe "
    "agrega agregar muestra mostrar muestrame ver quiero dame add show load display please "
    "favor porfa porfavor nueva"
)
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
# Words that appear in many titles and say little about which layer is meant.
_GENERIC_TEXT = (
    "ign idee espana spain espanol nacional national servicio service oficial official "
    "wms wmts tms xyz mvt teselas tiles"
)
GENERIC = frozenset(_GENERIC_TEXT.split())
_TYPE_WORDS = {"wms": "WMS", "wmts": "WMTS", "tms": "TMS", "xyz": "XYZ", "mvt": "MVT"}


def _stem(token: str) -> str:
    """Crude plural folding (ortofotos → ortofoto, redes → red); applied to both sides alike."""
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        if token.endswith("es") and len(token) > 4 and token[-3] in "lrndzj":
            return token[:-2]
        return token[:-1]
    return token


def tokens(text: str) -> tuple[str, ...]:
    """Comparable tokens of a phrase: camel-case split, folded, no stopwords, plurals folded."""
    out: list[str] = []
    for word in words(text, split_camel=True):
        if word in STOPWORDS:
            continue
        stem = _stem(word)
        if stem not in out:
            out.append(stem)
    return tuple(out)


def _weight(token: str) -> float:
    return 0.35 if token in GENERIC else 1.0


@lru_cache(maxsize=65536)
def _token_match(a: str, b: str) -> float:
    """How far token ``a`` is matched by ``b`` (1 exact, partial for typos and prefixes)."""
    if a == b:
        return 1.0
    from rapidfuzz import fuzz

    similarity = fuzz.ratio(a, b)
    if similarity >= 80:
        return 0.9 * similarity / 100
    if min(len(a), len(b)) >= 4 and (a.startswith(b) or b.startswith(a)):
        return 0.7
    return 0.0


def _side(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[float, float]:
    got = total = 0.0
    for t in a:
        w = _weight(t)
        total += w
        got += w * max(_token_match(t, u) for u in b)
    return got, total


def phrase_score(query: tuple[str, ...], phrase: tuple[str, ...]) -> float:
    """Weighted, typo-tolerant Dice similarity of two token lists, 0–100, order-free."""
    if not query or not phrase:
        return 0.0
    g1, t1 = _side(query, phrase)
    g2, t2 = _side(phrase, query)
    return 100.0 * (g1 + g2) / (t1 + t2)


@dataclass
class CatalogEntry:
    """One layer of the catalog (fields as in ``catalog.json``)."""

    id: str
    title_es: str
    title_en: str
    type: str
    url: str
    layer: str | None
    group: str
    preferred: bool
    raw: dict[str, Any] = field(repr=False)
    phrases: list[tuple[tuple[str, ...], float]] = field(default_factory=list, repr=False)
    exact: set[str] = field(default_factory=set, repr=False)
    identifiers: set[str] = field(default_factory=set, repr=False)
    id_key: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CatalogEntry:
        entry = cls(
            id=data["id"],
            title_es=data["title_es"],
            title_en=data["title_en"],
            type=data["type"].upper(),
            url=data["url"],
            layer=data.get("layer"),
            group=data.get("group") or data["id"],
            preferred=bool(data.get("preferred", True)),
            raw=data,
        )
        # Curated names count fully; layer names and the source's other titles (often legends,
        # e.g. "ParcelasCatastrales") slightly less, so curated aliases win ties.
        texts = [(data["id"], 1.0), (entry.title_es, 1.0), (entry.title_en, 1.0)]
        texts += [(a, 1.0) for a in data.get("aliases", [])]
        if entry.layer:
            texts.append((entry.layer, SOURCE_TITLE_FACTOR))
        texts += [(t, SOURCE_TITLE_FACTOR) for t in data.get("titles_es", [])]
        seen: set[tuple[str, ...]] = set()
        for text, factor in texts:
            toks = tokens(text)
            if toks and toks not in seen:
                seen.add(toks)
                entry.phrases.append((toks, factor))
        entry.exact = {compact(entry.title_es), compact(entry.title_en)}
        entry.identifiers = {compact(data["id"])}
        if entry.layer:
            entry.identifiers.add(compact(entry.layer))
        entry.id_key = compact(data["id"])
        return entry

    def score(self, query: tuple[str, ...], query_compact: str, identifier: bool = False) -> float:
        """0–100 similarity, +5 for an exact title (or, for one-word queries, id/layer name)."""
        best = max((f * phrase_score(query, p) for p, f in self.phrases), default=0.0)
        if query_compact and (
            query_compact in self.exact or (identifier and query_compact in self.identifiers)
        ):
            best = max(best, 100.0) + EXACT_BONUS
        return best

    @property
    def title(self) -> str:
        return self.title_es

    def summary(self) -> dict[str, Any]:
        """Short description for candidate lists shown to the model or the user."""
        return {"id": self.id, "title": self.title_es, "type": self.type}

    def to_layer(self) -> dict[str, Any]:
        """A full ``addLayer`` definition for this entry (the agreed shape)."""
        raw = self.raw
        layer: dict[str, Any] = {
            "type": self.type,
            "url": self.url,
            "name": self.layer,
            "legend": self.title_es,
        }
        if self.type == "WMTS":
            layer["format"] = raw.get("format") or "image/png"
            layer["matrixSet"] = raw.get("matrix_set") or "GoogleMapsCompatible"
            layer["style"] = raw.get("style") or "default"
        elif self.type == "WMS":
            layer["format"] = raw.get("format") or "image/png"
            layer["transparent"] = bool(raw.get("transparent", True))
            layer["version"] = raw.get("version") or "1.3.0"
            layer["tiled"] = False
        elif raw.get("format"):
            layer["format"] = raw["format"]
        if raw.get("max_zoom"):
            layer["max_zoom"] = raw["max_zoom"]
        layer["attribution"] = raw.get("attribution") or ""
        layer["catalog_id"] = self.id
        return layer


class Catalog:
    """The loaded catalog with its lookups. Immutable after loading, so safe across threads."""

    def __init__(self, entries: list[CatalogEntry], meta: dict[str, Any] | None = None) -> None:
        self.entries = entries
        self.meta = meta or {}
        self.by_id = {e.id.lower(): e for e in entries}
        self._by_url: dict[tuple[str, str], list[CatalogEntry]] = {}
        for e in entries:
            self._by_url.setdefault((e.type, _url_key(e.url)), []).append(e)

    @classmethod
    def load(cls) -> Catalog:
        text = (
            resources.files("idee_notebook_agent.services")
            .joinpath("data/catalog.json")
            .read_text(encoding="utf-8")
        )
        data = json.loads(text)
        entries = [CatalogEntry.from_dict(d) for d in data["layers"]]
        return cls(entries, {k: v for k, v in data.items() if k != "layers"})

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, entry_id: str) -> CatalogEntry | None:
        return self.by_id.get((entry_id or "").strip().lower())

    def search(
        self,
        text: str,
        limit: int = 5,
        *,
        prefer_type: str | None = None,
        variants: bool = False,
    ) -> list[tuple[CatalogEntry, float]]:
        """Entries best matching ``text``, best first, one per product unless ``variants``."""
        query = tokens(text)
        query_compact = compact(text)
        wanted = (prefer_type or "").upper() or next(
            (_TYPE_WORDS[t] for t in query if t in _TYPE_WORDS), ""
        )
        identifier = bool(text) and not any(c.isspace() for c in text.strip())
        scored = [(e, e.score(query, query_compact, identifier)) for e in self.entries]
        scored = [(e, s) for e, s in scored if s > 0]
        if variants:
            scored.sort(key=lambda es: (-es[1], not es[0].preferred))
            return scored[:limit]
        groups: dict[str, list[tuple[CatalogEntry, float]]] = {}
        for e, s in scored:
            groups.setdefault(e.group, []).append((e, s))
        best: list[tuple[CatalogEntry, float]] = []
        for members in groups.values():
            top = max(s for _, s in members)
            close = [(e, s) for e, s in members if s >= top - 10]
            typed = [m for m in members if m[0].type == wanted and m[1] >= top - 25]
            by_type = max(typed, key=lambda m: m[1]) if typed else None
            pick = (
                by_type
                or next((m for m in members if m[0].id_key == query_compact), None)
                or next((m for m in close if m[0].preferred and m[1] >= top - 6), None)
                or max(close, key=lambda m: m[1])
            )
            best.append((pick[0], top))
        best.sort(key=lambda es: -es[1])
        return best[:limit]

    def resolve(self, text: str, *, prefer_type: str | None = None) -> CatalogEntry:
        """The one entry ``text`` names; ToolError with ``candidates`` if unsure."""
        phrase = (text or "").strip()
        if not phrase:
            raise ToolError("Indica el nombre o el id de la capa del catálogo.")
        direct = self.get(phrase)
        if direct is not None and not prefer_type:
            return direct
        results = self.search(phrase, limit=6, prefer_type=prefer_type)
        if not results or results[0][1] < MIN_SCORE:
            suggestions = [e.summary() for e, s in results if s >= 35][:5]
            hint = (
                " Parecidas: " + "; ".join(f"{c['title']} ({c['id']})" for c in suggestions)
                if suggestions
                else ""
            )
            raise ToolError(
                f"No encuentro la capa '{phrase}' en el catálogo.{hint} Si es de otro servicio, "
                "búscala con searchIdeeService o indica type y url. "
                "(EN: layer not in the catalog.)",
                data={"candidates": suggestions, "reason": "not_found"},
            )
        top_entry, top_score = results[0]
        rivals = [
            (e, s)
            for e, s in results[1:]
            if s >= top_score - AMBIGUITY_MARGIN and not (top_score > 100 >= s)
        ]
        if rivals:
            candidates = [top_entry.summary()] + [e.summary() for e, _ in rivals]
            listed = "; ".join(f"{c['title']} ({c['id']}, {c['type']})" for c in candidates)
            raise ToolError(
                f"Hay varias capas que encajan con '{phrase}': {listed}. ¿Cuál quieres? "
                "(EN: several layers match; ask the user which one.)",
                data={"candidates": candidates, "reason": "ambiguous"},
            )
        return top_entry

    def match_definition(self, layer_type: str, url: str, name: str) -> CatalogEntry | None:
        """A catalog entry with this service URL whose id/title/layer is ``name``, if any."""
        options = self._by_url.get((layer_type.upper(), _url_key(url)), [])
        key = compact(name)
        return next((e for e in options if key in e.exact | e.identifiers), None)


def _url_key(url: str) -> str:
    base = (url or "").strip().split("?", 1)[0].rstrip("/").lower()
    return base.replace("http://", "https://", 1)


_CATALOG: Catalog | None = None
_LOCK = threading.Lock()


def get_catalog() -> Catalog:
    """The packaged catalog, loaded once (a documented, read-only cache)."""
    global _CATALOG
    with _LOCK:
        if _CATALOG is None:
            _CATALOG = Catalog.load()
        return _CATALOG


def search(text: str, limit: int = 5, **kwargs: Any) -> list[tuple[CatalogEntry, float]]:
    """Best catalog matches for ``text`` as ``(entry, score 0–105)``, best first."""
    return get_catalog().search(text, limit, **kwargs)


def resolve(text: str, *, prefer_type: str | None = None) -> CatalogEntry:
    """The entry ``text`` names, or ``ToolError`` (data: ``candidates``) when unsure."""
    return get_catalog().resolve(text, prefer_type=prefer_type)


# ---------------------------------------------------------------------- addLayer completion
_NEEDS_URL = {"GEOJSON", "KML", "WFS", "OGCAPIFEATURES"}


def guess_type(url: str) -> str:
    """The layer type a URL most likely is, for ``addLayer`` calls that leave ``type`` out."""
    low = url.lower()
    path = low.split("?", 1)[0]
    if path.endswith((".geojson", ".json")) or "geojson" in low:
        return "GeoJSON"
    if path.endswith((".kml", ".kmz")):
        return "KML"
    if "{z}" in low:
        if path.endswith((".pbf", ".mvt")):
            return "MVT"
        return "TMS" if "{-y}" in low else "XYZ"
    if "wmts" in low:
        return "WMTS"
    if "wfs" in low:
        return "WFS"
    if "/collections/" in path:
        return "OGCAPIFeatures"
    return "WMS"


def complete_add_layer(args: dict[str, Any]) -> dict[str, Any]:
    """Turn ``addLayer`` arguments into a full definition, using the catalog when no URL is given.

    ``{"name": "IGNBaseGris"}`` → the WMTS definition of IGNBase-gris; an explicit definition is
    kept (its type guessed if missing, a catalog title used as WMTS/WMS layer name corrected).
    Raises ``ToolError`` (with ``candidates``) when the phrase is ambiguous or unknown.
    """
    args = {k: v for k, v in args.items() if v is not None}
    layer_type = str(args.get("type") or "").strip()
    url = str(args.get("url") or "").strip()
    if args.get("data") is not None:
        args.setdefault("type", "GeoJSON")
        return args
    if url:
        args["url"] = url
        if not layer_type:
            layer_type = args["type"] = guess_type(url)
        if layer_type.upper() in ("WMS", "WMTS") and args.get("name"):
            entry = get_catalog().match_definition(layer_type, url, str(args["name"]))
            if entry is not None and entry.layer and entry.layer != args["name"]:
                user = {k: v for k, v in args.items() if k != "name"}
                args = {**entry.to_layer(), **user, "name": entry.layer}
        if layer_type.upper() == "WMTS":
            args.setdefault("matrixSet", "GoogleMapsCompatible")
            args.setdefault("style", "default")
        return args
    if layer_type.upper().replace(" ", "") in _NEEDS_URL:
        raise ToolError(
            f"Para una capa {layer_type} hace falta 'url' (o 'data' con el GeoJSON). "
            "(EN: url or data is required for this layer type.)"
        )
    phrase = str(args.get("name") or args.get("legend") or "").strip()
    if not phrase:
        raise ToolError(
            "Falta la capa: indica en 'name' un id o título del catálogo (p. ej. 'IGNBaseGris', "
            "'ortofoto PNOA', 'Catastro') o bien type y url de un servicio. "
            "(EN: give a catalog layer name, or type and url.)"
        )
    prefer = layer_type.upper() if layer_type.upper() in LAYER_TYPES else None
    entry = resolve(phrase, prefer_type=prefer)
    if not entry.layer:
        raise ToolError(
            f"La capa '{entry.title_es}' del catálogo no tiene un nombre de capa conocido. "
            f"Lista sus capas con searchIdeeService(url='{entry.url}') y usa addLayer con type "
            f"'{entry.type}', esa url y el nombre elegido.",
            data={"url": entry.url, "type": entry.type, "catalog_id": entry.id},
        )
    layer = entry.to_layer()
    for key in ("fit", "transparent", "tiled", "style"):
        if key in args:
            layer[key] = args[key]
    legend = args.get("legend")
    if legend and str(legend).strip() != phrase:
        layer["legend"] = legend
    log.debug("addLayer '%s' resuelto con el catálogo: %s", phrase, entry.id)
    return layer


__all__ = [
    "Catalog",
    "CatalogEntry",
    "complete_add_layer",
    "get_catalog",
    "guess_type",
    "resolve",
    "search",
]
