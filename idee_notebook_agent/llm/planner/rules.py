"""Load the planner's intent rules from YAML (``skills/intents/*.yaml``), so phrasings are data.

Each file has ``intents:`` (rules) and may add ``vocabulary:`` (named phrase lists that rules
reference as ``$name``) and ``settings:`` (fillers, aliases, zoom levels...). Files are merged in
name order; user skill folders (``IDEE_SKILLS_DIRS``) may add an ``intents/`` folder of their own.
The files have no top-level ``name``, so the skill loader skips them.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...errors import ConfigurationError
from ...resources import data_path
from .text import fold

log = logging.getLogger(__name__)

ACTIONS = (
    "goto",
    "boundary",
    "zoom_in",
    "zoom_out",
    "set_zoom",
    "get_zoom",
    "where_am_i",
    "get_extent",
    "list_layers",
    "add_layer",
    "remove_layer",
    "detect",
    "list_detectors",
    "search_services",
    "help",
)
SLOTS = ("none", "place", "layer", "remove", "topic", "level", "zoom", "detect")


@dataclass
class Rule:
    """One way of recognising a request: anchor phrases, conditions and what to extract."""

    id: str
    action: str
    priority: int = 0
    anchors: list[str] = field(default_factory=list)
    require: list[list[str]] = field(default_factory=list)
    forbid: list[str] = field(default_factory=list)
    slot: str = "none"
    params: dict[str, Any] = field(default_factory=dict)
    origin: str = ""


@dataclass
class PlannerData:
    """All rules (highest priority first), named vocabularies and merged settings."""

    rules: list[Rule]
    vocabulary: dict[str, list[str]]
    settings: dict[str, Any]
    _derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def get(self, path: str, default: Any = None) -> Any:
        node: Any = self.settings
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def words(self, path: str) -> list[str]:
        value = self.get(path, [])
        return [str(v) for v in value] if isinstance(value, list) else []

    def vocab(self, name: str) -> list[str]:
        return list(self.vocabulary.get(name, []))

    def folded(self, path: str) -> frozenset[str]:
        """The phrases of a settings list, folded, as a set (computed once)."""
        key = f"set:{path}"
        if key not in self._derived:
            self._derived[key] = frozenset(fold(w) for w in self.words(path))
        return self._derived[key]

    def choices(self, path: str) -> dict[str, str]:
        """Folded phrase → target for an alias table ``{target: [phrases]}`` (computed once)."""
        key = f"alias:{path}"
        if key not in self._derived:
            table = self.get(path, {}) or {}
            out: dict[str, str] = {}
            for target, phrases in table.items():
                for phrase in [target, *(phrases or [])]:
                    out.setdefault(fold(str(phrase)), str(target))
            self._derived[key] = out
        return self._derived[key]


def _merge(into: dict[str, Any], new: dict[str, Any]) -> None:
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        elif isinstance(value, list) and isinstance(into.get(key), list):
            into[key] = [*into[key], *value]
        else:
            into[key] = value


def _phrases(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(
        isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value
    ):
        return [str(v) for v in value]
    raise ConfigurationError(
        f"{where}: se esperaba una lista de frases (pon entre comillas on, off, yes, no...)."
    )


def _expand(items: list[str], vocabulary: dict[str, list[str]], where: str) -> list[str]:
    out: list[str] = []
    for item in items:
        if item.startswith("$"):
            name = item[1:]
            if name not in vocabulary:
                raise ConfigurationError(f"{where}: vocabulario '${name}' desconocido.")
            out.extend(vocabulary[name])
        else:
            out.append(item)
    return out


def _expand_vocabulary(name: str, vocabulary: dict[str, list[str]], seen: set[str]) -> list[str]:
    """A vocabulary list with its ``$other`` references expanded (cycles are an error)."""
    if name in seen:
        raise ConfigurationError(f"Vocabulario '${name}' se referencia a sí mismo.")
    out: list[str] = []
    for item in vocabulary.get(name, []):
        if item.startswith("$"):
            other = item[1:]
            if other not in vocabulary:
                raise ConfigurationError(f"Vocabulario '${other}' desconocido (en '${name}').")
            out.extend(_expand_vocabulary(other, vocabulary, seen | {name}))
        else:
            out.append(item)
    return out


def _rule(raw: Any, vocabulary: dict[str, list[str]], origin: str) -> Rule:
    if not isinstance(raw, dict) or not raw.get("id"):
        raise ConfigurationError(f"{origin}: cada intención necesita 'id'.")
    where = f"{origin} ({raw['id']})"
    action = str(raw.get("action") or raw["id"])
    if action not in ACTIONS:
        raise ConfigurationError(f"{where}: acción '{action}' desconocida ({', '.join(ACTIONS)}).")
    slot = str(raw.get("slot") or "none")
    if slot not in SLOTS:
        raise ConfigurationError(f"{where}: slot '{slot}' desconocido ({', '.join(SLOTS)}).")
    anchors = _expand(_phrases(raw.get("anchors"), where), vocabulary, where)
    if not anchors:
        raise ConfigurationError(f"{where}: 'anchors' no puede estar vacío.")
    empty = [a for a in anchors if not fold(a).strip()]
    if empty:
        raise ConfigurationError(f"{where}: frases sin letras ni números: {empty}.")
    require_raw = raw.get("require") or []
    if not isinstance(require_raw, list):
        raise ConfigurationError(f"{where}: 'require' debe ser una lista de grupos.")
    require = [
        _expand(_phrases(group, where), vocabulary, where)
        for group in (g if isinstance(g, list) else [g] for g in require_raw)
    ]
    params = raw.get("params") or {}
    if not isinstance(params, dict):
        raise ConfigurationError(f"{where}: 'params' debe ser un objeto.")
    return Rule(
        id=str(raw["id"]),
        action=action,
        priority=int(raw.get("priority", 0)),
        anchors=anchors,
        require=require,
        forbid=_expand(_phrases(raw.get("forbid"), where), vocabulary, where),
        slot=slot,
        params=dict(params),
        origin=origin,
    )


def load_folders(folders: list[Path]) -> PlannerData:
    """Read and validate every ``*.yaml`` in ``folders``; errors name the file and the rule."""
    docs: list[tuple[str, dict[str, Any]]] = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]):
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError) as exc:
                raise ConfigurationError(
                    f"No se pudo leer el fichero de intenciones {path}: {exc}"
                ) from exc
            if not isinstance(data, dict) or "intents" not in data:
                raise ConfigurationError(f"{path}: falta la clave 'intents:'.")
            docs.append((str(path), data))
    vocabulary: dict[str, list[str]] = {}
    settings: dict[str, Any] = {}
    for origin, data in docs:
        for name, items in (data.get("vocabulary") or {}).items():
            vocabulary.setdefault(str(name), []).extend(_phrases(items, f"{origin} vocabulary"))
        extra = data.get("settings") or {}
        if not isinstance(extra, dict):
            raise ConfigurationError(f"{origin}: 'settings' debe ser un objeto.")
        _merge(settings, extra)
    for name in list(vocabulary):
        vocabulary[name] = _expand_vocabulary(name, vocabulary, set())
    aliases = (settings.get("layers") or {}).get("aliases") or {}
    vocabulary.setdefault("layer_aliases", [])
    for target, phrases in aliases.items():
        vocabulary["layer_aliases"].extend([str(target), *(str(p) for p in phrases or [])])
    rules: list[Rule] = []
    seen: set[str] = set()
    for origin, data in docs:
        for raw in data.get("intents") or []:
            rule = _rule(raw, vocabulary, origin)
            if rule.id in seen:
                raise ConfigurationError(f"{origin}: intención '{rule.id}' repetida.")
            seen.add(rule.id)
            rules.append(rule)
    rules.sort(key=lambda r: -r.priority)  # stable: file order breaks ties
    return PlannerData(rules, vocabulary, settings)


def default_folders(extra_skill_dirs: list[Path] | None = None) -> list[Path]:
    folders = [data_path("skills") / "intents"]
    folders.extend(Path(d) / "intents" for d in extra_skill_dirs or [])
    return folders


_cache: dict[tuple[Any, ...], PlannerData] = {}
_lock = threading.Lock()


def load_planner_data(folders: list[Path] | None = None) -> PlannerData:
    """The merged rules, cached until a file changes (a documented, thread-safe cache)."""
    folders = folders or default_folders()
    stamp: list[tuple[str, float]] = []
    for folder in folders:
        if folder.is_dir():
            stamp.extend((str(p), p.stat().st_mtime) for p in sorted(folder.glob("*.y*ml")))
    key = (tuple(str(f) for f in folders), tuple(stamp))
    with _lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    data = load_folders(folders)
    with _lock:
        _cache.clear()
        _cache[key] = data
    log.debug("Offline planner: %d intent rules loaded", len(data.rules))
    return data
