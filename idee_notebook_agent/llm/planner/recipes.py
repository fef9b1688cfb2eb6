"""What each planned step does, written as generators: ``result = yield Call(...)``.

A recipe reads like the sequence a model would follow (geocode, then zoom to the best
candidate...). The runner replays it against the tool results already in the conversation, so
the planner stays stateless. A recipe ends by returning an ``Outcome``: sentences for the final
answer, or a question that ends the turn.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz import fuzz

from . import answers
from .parse import Step
from .rules import PlannerData
from .text import fold


@dataclass
class Call:
    """A tool call the plan wants. ``terminal``: the recipe ends after it, whatever the result."""

    name: str
    args: dict[str, Any]
    terminal: bool = False


@dataclass
class Result:
    """A call that ran, with what it returned."""

    name: str
    args: dict[str, Any]
    value: Any
    success: bool = True
    unavailable: bool = False

    @property
    def ok(self) -> bool:
        return self.success and not (
            isinstance(self.value, dict) and self.value.get("success") is False
        )

    @property
    def error(self) -> str:
        if isinstance(self.value, dict) and self.value.get("error"):
            return str(self.value["error"])
        return str(self.value) if self.value not in (None, "") else "error desconocido"

    def get(self, key: str, default: Any = None) -> Any:
        return self.value.get(key, default) if isinstance(self.value, dict) else default


@dataclass
class Outcome:
    lines: list[str] = field(default_factory=list)
    question: str | None = None


@dataclass
class Env:
    """What recipes may read: language, the tools offered, the rules' settings, the view."""

    lang: str
    tools: set[str]
    data: PlannerData
    map_state: dict[str, Any] | None = None

    def t(self, key: str, **values: Any) -> str:
        return answers.t(self.lang, key, **values)


Recipe = Generator[Call, Result, Outcome]


# ------------------------------------------------------------------------------ helpers
def failure(env: Env, res: Result, what: str) -> str:
    if res.unavailable:
        return env.t("tool_missing", what=what, tool=res.name)
    return env.t("tool_failed", what=what, error=res.error)


def _num(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number else None  # NaN is not a number here


def _type_key(value: Any) -> str:
    text = unicodedata.normalize("NFKD", str(value or "").lower())
    return "".join(c for c in text if not unicodedata.combining(c)).strip()


def _zoom_for(env: Env, candidate_type: Any) -> int:
    table = {_type_key(k): v for k, v in (env.data.get("zoom.by_type", {}) or {}).items()}
    return int(table.get(_type_key(candidate_type), env.data.get("zoom.default", 13)))


def _best(res: Result) -> dict[str, Any] | None:
    best = res.get("best")
    if not isinstance(best, dict):
        candidates = res.get("candidates") or []
        best = candidates[0] if candidates and isinstance(candidates[0], dict) else None
    return best


def _latlon(candidate: dict[str, Any]) -> tuple[float, float] | None:
    lat = _num(candidate.get("lat"))
    lon = _num(candidate.get("lon", candidate.get("lng")))
    if lat is None or lon is None or (lat == 0 and lon == 0):
        return None
    return lat, lon


def _describe(candidate: dict[str, Any]) -> str:
    """ "Calle Mayor 1, Madrid" or "Toledo" (not "Toledo, Toledo"): the address without repeats."""
    parts = [*str(candidate.get("address") or "").split(","), candidate.get("name")]
    if not str(candidate.get("address") or "").strip():
        parts.append(candidate.get("province"))
    seen = dict.fromkeys(str(p).strip() for p in parts if p and str(p).strip())
    return ", ".join(seen) or "?"


def _bbox(value: Any) -> list[float] | None:
    if isinstance(value, dict):
        value = [value.get(k) for k in ("minX", "minY", "maxX", "maxY")]
    if not isinstance(value, (list, tuple)) or len(value) != 4:
        return None
    numbers = [_num(v) for v in value]
    if any(n is None for n in numbers):
        return None
    box = [float(n) for n in numbers]  # type: ignore[arg-type]
    if box[0] > box[2] or box[1] > box[3]:
        return None
    return box


def _not_found(env: Env, q: str, res: Result) -> str:
    if res.unavailable:
        return failure(env, res, env.t("what.geocode", q=q))
    detail = ""
    if not res.ok and res.error and "error desconocido" not in res.error:
        detail = f" ({res.error})"
    return env.t("not_found", q=q, detail=detail)


# ------------------------------------------------------------------------------ navigation
def goto(step: Step, env: Env) -> Recipe:
    place = str(step.params.get("place") or "")
    zoom = step.params.get("zoom")
    coords = step.params.get("coords")
    if coords:
        lat, lon = coords
        level = int(zoom) if zoom is not None else int(env.data.get("zoom.coordinates", 14))
        res = yield Call("zoomTo", {"lat": lat, "lon": lon, "zoom": _clamp(level)}, terminal=True)
        if not res.ok:
            return Outcome([failure(env, res, env.t("what.move"))])
        return Outcome([env.t("goto.coords", lat=lat, lon=lon, zoom=_clamp(level))])
    res = yield Call("geocodePlace", {"q": place, "draw": False})
    best = _best(res) if res.ok else None
    point = _latlon(best) if best else None
    if best is None or point is None:
        return Outcome([_not_found(env, place, res)])
    level = _clamp(int(zoom) if zoom is not None else _zoom_for(env, best.get("type")))
    moved = yield Call("zoomTo", {"lat": point[0], "lon": point[1], "zoom": level}, terminal=True)
    if not moved.ok:
        return Outcome([failure(env, moved, env.t("what.move"))])
    return Outcome([env.t("goto.ok", name=_describe(best), zoom=level)])


def boundary(step: Step, env: Env) -> Recipe:
    place = str(step.params.get("place") or "")
    kind = step.params.get("type")
    kinds = [kind] if kind else list(env.data.get("boundary.try_types", ["municipio", "provincia"]))
    res: Result | None = None
    best: dict[str, Any] | None = None
    for candidate_type in kinds:
        res = yield Call("geocodePlace", {"q": place, "type": candidate_type})
        best = _best(res) if res.ok else None
        if best is not None:
            kind = candidate_type
            break
    if res is None or best is None:
        return Outcome([_not_found(env, place, res) if res else ""])
    labels = env.data.get(f"boundary.labels.{env.lang}", {}) or {}
    label = str(labels.get(_type_key(kind), ""))
    name = str(best.get("name") or place)
    box = _bbox(res.get("bbox")) or _bbox(best.get("bbox"))
    if box is not None:
        args = {"minLon": box[0], "minLat": box[1], "maxLon": box[2], "maxLat": box[3]}
        fitted = yield Call("zoomToExtent", args, terminal=True)
        if not fitted.ok:
            return Outcome([failure(env, fitted, env.t("what.move"))])
        if res.get("boundary") is not None:
            return Outcome([env.t("boundary.ok", kind=label, name=name).replace("  ", " ")])
        return Outcome([env.t("boundary.framed", name=_describe(best))])
    point = _latlon(best)
    if point is None:
        return Outcome([env.t("boundary.no_outline", name=_describe(best))])
    level = _zoom_for(env, kind)
    moved = yield Call("zoomTo", {"lat": point[0], "lon": point[1], "zoom": level}, terminal=True)
    if not moved.ok:
        return Outcome([failure(env, moved, env.t("what.move"))])
    if res.get("boundary") is not None:
        return Outcome([env.t("boundary.ok", kind=label, name=name).replace("  ", " ")])
    return Outcome([env.t("boundary.no_outline", name=_describe(best))])


def _clamp(level: int) -> int:
    return max(0, min(22, int(level)))


def _current_level(res: Result) -> float | None:
    if isinstance(res.value, (int, float)):
        return float(res.value)
    return _num(res.get("level", res.get("zoom")))


def set_zoom(step: Step, env: Env) -> Recipe:
    level = int(step.params.get("level", -1))
    if not 0 <= level <= 22:
        return Outcome([env.t("zoom.range", level=level)])
    res = yield Call("setZoom", {"level": level}, terminal=True)
    if not res.ok:
        return Outcome([failure(env, res, env.t("what.zoom"))])
    return Outcome([env.t("zoom.set", level=level)])


def _zoom_by(step: Step, env: Env, sign: int) -> Recipe:
    if step.params.get("level") is not None:
        return (yield from set_zoom(step, env))
    res = yield Call("getCurrentZoom", {})
    current = _current_level(res) if res.ok else None
    if current is None:
        return Outcome([failure(env, res, env.t("what.read_zoom"))])
    old = int(round(current))
    new = _clamp(old + sign * int(step.params.get("delta", 1)))
    if new == old:
        return Outcome([env.t("zoom.limit", level=old)])
    changed = yield Call("setZoom", {"level": new}, terminal=True)
    if not changed.ok:
        return Outcome([failure(env, changed, env.t("what.zoom"))])
    return Outcome([env.t("zoom.changed", old=old, new=new)])


def zoom_in(step: Step, env: Env) -> Recipe:
    return (yield from _zoom_by(step, env, +1))


def zoom_out(step: Step, env: Env) -> Recipe:
    return (yield from _zoom_by(step, env, -1))


def get_zoom(step: Step, env: Env) -> Recipe:
    res = yield Call("getCurrentZoom", {}, terminal=True)
    level = _current_level(res) if res.ok else None
    if level is None:
        return Outcome([failure(env, res, env.t("what.read_zoom"))])
    shown = int(level) if float(level).is_integer() else round(level, 1)
    return Outcome([env.t("zoom.current", level=shown)])


def where_am_i(step: Step, env: Env) -> Recipe:
    res = yield Call("getMapCenter", {})
    lat = _num(res.get("lat")) if res.ok else None
    lon = _num(res.get("lon")) if res.ok else None
    if lat is None or lon is None:
        return Outcome([failure(env, res, env.t("what.center"))])
    near = ""
    srs = str(res.get("srs") or "EPSG:4326").upper()
    if "geocodePlace" in env.tools and srs in ("EPSG:4326", "CRS:84", "WGS84"):
        found = yield Call("geocodePlace", {"lat": lat, "lon": lon}, terminal=True)
        place = found.get("result") if found.ok else None
        if isinstance(place, dict):
            parts = [
                *str(place.get("address") or "").split(","),
                place.get("muni"),
                place.get("province"),
            ]
            text = ", ".join(dict.fromkeys(str(p).strip() for p in parts if p and str(p).strip()))
            if text:
                near = env.t("center.near", place=text)
    return Outcome([env.t("center", lat=round(lat, 5), lon=round(lon, 5), near=near)])


def get_extent(step: Step, env: Env) -> Recipe:
    res = yield Call("getMapExtent", {}, terminal=True)
    box = _bbox(res.value) if res.ok else None
    if box is None:
        return Outcome([failure(env, res, env.t("what.extent"))])
    return Outcome(
        [
            env.t(
                "extent",
                minX=round(box[0], 5),
                minY=round(box[1], 5),
                maxX=round(box[2], 5),
                maxY=round(box[3], 5),
                srs=res.get("srs") or "EPSG:4326",
            )
        ]
    )


# ------------------------------------------------------------------------------ layers
def _layer_list(res: Result) -> list[dict[str, Any]]:
    value = res.value
    if isinstance(value, dict):
        value = value.get("layers", [])
    if not isinstance(value, list):
        return []
    return [item if isinstance(item, dict) else {"name": str(item)} for item in value]


def _layer_line(env: Env, layer: dict[str, Any]) -> str:
    name = str(layer.get("name") or "")
    legend = str(layer.get("legend") or "")
    kind = str(layer.get("type") or "")
    label = f"{legend} ({name})" if legend and legend != name else name
    if kind:
        label += f" [{kind}]"
    if layer.get("base"):
        label += env.t("layers.base")
    return f"- {label}"


def list_layers(step: Step, env: Env) -> Recipe:
    res = yield Call("listActiveLayers", {}, terminal=True)
    if not res.ok:
        return Outcome([failure(env, res, env.t("what.layers"))])
    layers = _layer_list(res)
    if not layers:
        return Outcome([env.t("layers.none")])
    return Outcome([env.t("layers.list"), *(_layer_line(env, layer) for layer in layers)])


def _candidate_lines(candidates: list[Any]) -> list[str]:
    lines = []
    for i, item in enumerate(candidates[:9], start=1):
        if isinstance(item, dict):
            title = item.get("title") or item.get("name") or item.get("id") or "?"
            extra = [str(item[k]) for k in ("type", "id") if item.get(k) and item[k] != title]
            lines.append(f"{i}. {title}" + (f" ({', '.join(extra)})" if extra else ""))
        else:
            lines.append(f"{i}. {item}")
    return lines


def add_layer(step: Step, env: Env) -> Recipe:
    names = [str(n) for n in step.params.get("names") or [] if str(n).strip()]
    lines: list[str] = []
    for name in names:
        res = yield Call("addLayer", {"name": name})
        if res.ok:
            legend = str(res.args.get("legend") or res.get("name") or name)
            kind = res.get("type") or res.args.get("type")
            lines.append(env.t("layer.added", name=legend, kind=f" ({kind})" if kind else ""))
            continue
        candidates = res.get("candidates") or []
        if candidates:
            intro = "layer.maybe" if res.get("reason") == "not_found" else "layer.which"
            question = "\n".join(
                [
                    env.t(intro, q=name),
                    *_candidate_lines(candidates),
                    env.t("ask.pick"),
                ]
            )
            return Outcome(lines, question=question)
        lines.append(failure(env, res, env.t("what.add", name=name)))
        if "searchIdeeService" in env.tools and not res.unavailable:
            lines.append(env.t("layer.search_hint", q=step.params.get("phrase") or name))
    return Outcome(lines)


def _layer_score(queries: list[str], layer: dict[str, Any]) -> float:
    best = 0.0
    fields = [fold(str(layer.get(k) or "")) for k in ("name", "legend", "catalog_id")]
    for query in queries:
        q = fold(query)
        if not q:
            continue
        for value in fields:
            if not value:
                continue
            if q == value:
                return 100.0
            best = max(best, fuzz.WRatio(q, value))
    return best


def remove_layer(step: Step, env: Env) -> Recipe:
    res = yield Call("listActiveLayers", {})
    if not res.ok:
        return Outcome([failure(env, res, env.t("what.layers"))])
    layers = _layer_list(res)
    force = bool(step.params.get("force"))
    removable = [layer for layer in layers if not layer.get("base")]
    targets: list[dict[str, Any]] = []
    lines: list[str] = []
    if step.params.get("all"):
        targets = removable
        if not targets:
            return Outcome([env.t("layer.nothing_to_remove")])
    elif not step.params.get("names"):
        if force:
            targets = [layer for layer in layers if layer.get("base")][:1]
        elif len(removable) == 1:
            targets = removable
        elif not removable:
            return Outcome([env.t("layer.nothing_to_remove")])
        else:
            question = "\n".join(
                [env.t("layer.which_remove"), *(_layer_line(env, la) for la in removable)]
            )
            return Outcome([], question=question)
    else:
        names = [str(n) for n in step.params["names"]]
        aliases = list(step.params.get("aliases") or [])
        aliases += [None] * (len(names) - len(aliases))
        cutoff = float(env.data.get("layers.remove_cutoff", 80))
        for name, alias in zip(names, aliases, strict=True):
            queries = [name, str(alias)] if alias else [name]
            scored = sorted(
                ((_layer_score(queries, layer), i) for i, layer in enumerate(layers)),
                reverse=True,
            )
            if not scored or scored[0][0] < cutoff:
                lines.append(env.t("layer.not_loaded", q=name))
                if layers:
                    lines.extend([env.t("layers.list"), *(_layer_line(env, la) for la in layers)])
                continue
            targets.append(layers[scored[0][1]])
    for layer in targets:
        name = str(layer.get("name") or "")
        if layer.get("base") and not force:
            lines.append(env.t("layer.is_base", name=layer.get("legend") or name))
            continue
        args: dict[str, Any] = {"name": name}
        if layer.get("base"):
            args["force"] = True
        done = yield Call("removeLayer", args)
        if done.ok:
            lines.append(env.t("layer.removed", name=layer.get("legend") or name))
        else:
            lines.append(failure(env, done, env.t("what.remove", name=name)))
    return Outcome(lines)


# ------------------------------------------------------------------------------ detection
def _detector_label(env: Env, detector: str) -> str:
    info = (env.data.get("detectors.known", {}) or {}).get(detector) or {}
    return str(info.get(env.lang) or info.get("es") or detector)


def list_detectors(step: Step, env: Env) -> Recipe:
    res = yield Call("listDetectors", {}, terminal=True)
    if not res.ok:
        return Outcome([failure(env, res, env.t("what.detectors"))])
    return Outcome([env.t("detectors.list"), *_detector_lines(res)])


def _detector_lines(res: Result) -> list[str]:
    items = res.value.get("detectors") if isinstance(res.value, dict) else res.value
    lines = []
    for item in items or []:
        if isinstance(item, dict):
            name = item.get("name") or item.get("id") or "?"
            desc = item.get("description") or ", ".join(map(str, item.get("classes") or []))
            lines.append(f"- {name}" + (f": {desc}" if desc else ""))
        else:
            lines.append(f"- {item}")
    return lines


def detect(step: Step, env: Env) -> Recipe:
    detector = step.params.get("detector")
    if not detector:
        obj = str(step.params.get("object") or "?")
        lines = [env.t("detect.unknown", object=obj)]
        if "listDetectors" in env.tools:
            res = yield Call("listDetectors", {}, terminal=True)
            if res.ok:
                lines.extend([env.t("detectors.list"), *_detector_lines(res)])
        return Outcome(lines)
    label = _detector_label(env, str(detector))
    res = yield Call("getMapExtent", {})
    box = _bbox(res.value) if res.ok else None
    if box is None:
        return Outcome([failure(env, res, env.t("what.extent"))])
    args: dict[str, Any] = {
        "detector": detector,
        "bbox": {"minX": box[0], "minY": box[1], "maxX": box[2], "maxY": box[3]},
    }
    srs = str(res.get("srs") or "EPSG:4326")
    if srs.upper() != "EPSG:4326":
        args["srs"] = srs
    found = yield Call("detectObjects", args, terminal=True)
    if not found.ok:
        return Outcome([failure(env, found, env.t("what.detect", object=label))])
    return Outcome(
        [
            env.t(
                "detect.ok",
                count=found.get("count", "?"),
                object=label,
                method=found.get("method") or "?",
                layer=found.get("layer_name") or label,
            )
        ]
    )


# ------------------------------------------------------------------------------ services
def search_services(step: Step, env: Env) -> Recipe:
    query = str(step.params.get("query") or "")
    args: dict[str, Any] = {"query": query}
    if step.params.get("type"):
        args["type"] = step.params["type"]
    res = yield Call("searchIdeeService", args, terminal=True)
    if not res.ok:
        return Outcome([failure(env, res, env.t("what.search", q=query))])
    services = [s for s in res.get("services") or [] if isinstance(s, dict)]
    errors = [str(e) for e in res.get("errors") or [] if e]
    limit = int(env.data.get("services.show", 5))
    if not services:
        lines = [env.t("search.none", q=query)]
    else:
        key = "search.found_one" if len(services) == 1 else "search.found"
        lines = [env.t(key, count=len(services), q=query)]
        for i, service in enumerate(services[:limit], start=1):
            layers = [str(x) for x in service.get("layers") or []][:3]
            text = f"{i}. {service.get('title') or '?'}"
            if service.get("type"):
                text += f" ({service['type']})"
            if service.get("url"):
                text += f": {service['url']}"
            if layers:
                text += " — " + ", ".join(layers)
            lines.append(text)
        if len(services) > limit:
            lines.append(env.t("search.more", n=len(services) - limit))
        if "addLayer" in env.tools:
            lines.append(env.t("search.hint"))
    if errors:
        lines.append(env.t("search.errors", n=len(errors), first=errors[0]))
    return Outcome(lines)


def add_service(step: Step, env: Env) -> Recipe:
    """Load a service the user picked from a search: its first layer, listing layers if needed."""
    service: dict[str, Any] = step.params.get("service") or {}
    title = str(service.get("title") or service.get("url") or "?")
    kind = str(service.get("type") or "WMS")
    url = str(service.get("url") or "")
    layers = [str(x) for x in service.get("layers") or [] if x]
    if not layers and kind.upper() in ("WMS", "WMTS") and url:
        res = yield Call("searchIdeeService", {"url": url})
        if res.ok:
            for item in res.get("layers") or []:
                name = item.get("name") if isinstance(item, dict) else item
                if name:
                    layers.append(str(name))
    args: dict[str, Any] = {"type": kind, "url": url, "legend": title}
    if layers:
        args["name"] = layers[0]
    res = yield Call("addLayer", args, terminal=True)
    if not res.ok:
        return Outcome([failure(env, res, env.t("what.add", name=title))])
    return Outcome([env.t("layer.added", name=title, kind=f" ({kind})")])


# ------------------------------------------------------------------------------ words only
def help_(step: Step, env: Env) -> Recipe:
    kind = str(step.params.get("kind") or "help")
    prefix = env.t(kind) if kind in ("greeting", "thanks") else ""
    if kind == "thanks":
        return Outcome([prefix.strip()])
    return Outcome([prefix + answers.capabilities(env.lang)])
    yield  # pragma: no cover - makes this a generator


def fallback(step: Step, env: Env) -> Recipe:
    text = str(step.params.get("text") or step.clause).strip()
    return Outcome([env.t("fallback", text=text[:120])])
    yield  # pragma: no cover - makes this a generator


RECIPES: dict[str, Callable[[Step, Env], Recipe]] = {
    "goto": goto,
    "boundary": boundary,
    "zoom_in": zoom_in,
    "zoom_out": zoom_out,
    "set_zoom": set_zoom,
    "get_zoom": get_zoom,
    "where_am_i": where_am_i,
    "get_extent": get_extent,
    "list_layers": list_layers,
    "add_layer": add_layer,
    "remove_layer": remove_layer,
    "detect": detect,
    "list_detectors": list_detectors,
    "search_services": search_services,
    "add_service": add_service,
    "help": help_,
    "fallback": fallback,
}
