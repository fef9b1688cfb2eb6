"""The tool registry: specs the model sees, executors that run them, and start-up validation.

Tools are data, executors are code (DESIGN.md). A spec with a server executor runs in the agent
loop; a spec without one is a map-side tool, run by whoever owns the map (the notebook's
``LeafletMapPort`` or the browser plugin). Built-ins and user additions register the same way.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from ..config import Settings, get_settings
from ..core.conversation import ToolCall
from ..core.mapport import MAP_TOOLS
from ..errors import ConfigurationError, ToolError
from ..resources import data_path
from .skills import Skill, load_skills
from .specs import ToolSpec, load_tool_specs

log = logging.getLogger(__name__)

Executor = Callable[[dict[str, Any], "ToolContext"], Any | Awaitable[Any]]
Preprocessor = Callable[[dict[str, Any], "ToolContext"], dict[str, Any]]

# Built-in executors register here at import time through @server_tool; a documented registry.
_BUILTIN_EXECUTORS: dict[str, Executor] = {}
_BUILTIN_PREPROCESSORS: dict[str, Preprocessor] = {}
_BUILTIN_LOCK = threading.Lock()

# Specs that always run on the server: without their module they answer "not available" rather
# than being sent to a map front end that could not run them either.
SERVER_SIDE_TOOLS: tuple[str, ...] = (
    "fetchWebPage",
    "geocodePlace",
    "searchIdeeService",
    "listDetectors",
    "detectObjects",
)

# Modules whose import registers the built-in server tools (kept lazy: heavy deps load on call).
BUILTIN_TOOL_MODULES: tuple[str, ...] = (
    "idee_notebook_agent.services.tools",
    "idee_notebook_agent.detection.tools",
)


def server_tool(name: str) -> Callable[[Executor], Executor]:
    """Register a built-in server-side executor for the tool spec called ``name``."""

    def decorate(fn: Executor) -> Executor:
        with _BUILTIN_LOCK:
            _BUILTIN_EXECUTORS[name] = fn
        return fn

    return decorate


def map_tool_preprocessor(name: str) -> Callable[[Preprocessor], Preprocessor]:
    """Register a function that completes a map tool's arguments before any port runs it.

    Used e.g. to resolve ``addLayer(name="IGNBaseGris")`` against the layer catalog so that both
    the notebook map and the browser plugin receive a full layer definition.
    """

    def decorate(fn: Preprocessor) -> Preprocessor:
        with _BUILTIN_LOCK:
            _BUILTIN_PREPROCESSORS[name] = fn
        return fn

    return decorate


@dataclass
class ToolContext:
    """What an executor may use: settings, the map view (degrees) and a way to emit events."""

    settings: Settings
    map_state: dict[str, Any] | None = None
    emit: Callable[[Any], None] = lambda event: None
    conversation_id: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    def emit_layer(self, layer: dict[str, Any]) -> None:
        from ..core.events import LayerEvent

        self.emit(LayerEvent(layer))


def _unavailable(name: str) -> Executor:
    def executor(args: dict[str, Any], ctx: ToolContext) -> Any:
        raise ToolError(f"La herramienta '{name}' no está disponible en esta instalación.")

    return executor


def _import_builtin_modules() -> None:
    for module in BUILTIN_TOOL_MODULES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            log.debug("Built-in tool module %s not present", module)


class ToolRegistry:
    """Specs + executors + skills, validated together."""

    def __init__(
        self,
        specs: list[ToolSpec],
        executors: dict[str, Executor] | None = None,
        skills: list[Skill] | None = None,
        preprocessors: dict[str, Preprocessor] | None = None,
    ) -> None:
        self.specs: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in self.specs:
                raise ConfigurationError(f"Herramienta duplicada '{spec.name}'.")
            self.specs[spec.name] = spec
        self.executors: dict[str, Executor] = dict(executors or {})
        self.preprocessors: dict[str, Preprocessor] = dict(preprocessors or {})
        self.skills: list[Skill] = list(skills or [])
        self._validators = {
            name: Draft202012Validator(s.parameters) for name, s in self.specs.items()
        }
        self._lock = threading.Lock()
        self.validate()

    # ------------------------------------------------------------------ construction
    @classmethod
    def load(
        cls,
        settings: Settings | None = None,
        *,
        tool_dirs: list[Path] | None = None,
        skill_dirs: list[Path] | None = None,
        executors: dict[str, Executor] | None = None,
        include_builtin_executors: bool = True,
    ) -> ToolRegistry:
        """Load built-in and configured tool/skill folders and the built-in executors."""
        settings = settings or get_settings()
        tdirs = [data_path("tools"), *settings.split_dirs(settings.tools_dirs), *(tool_dirs or [])]
        sdirs = [
            data_path("skills"),
            *settings.split_dirs(settings.skills_dirs),
            *(skill_dirs or []),
        ]
        all_executors: dict[str, Executor] = {}
        preprocessors: dict[str, Preprocessor] = {}
        if include_builtin_executors:
            _import_builtin_modules()
            with _BUILTIN_LOCK:
                all_executors.update(_BUILTIN_EXECUTORS)
                preprocessors.update(_BUILTIN_PREPROCESSORS)
        all_executors.update(executors or {})
        for name in SERVER_SIDE_TOOLS:
            all_executors.setdefault(name, _unavailable(name))
        return cls(load_tool_specs(tdirs), all_executors, load_skills(sdirs), preprocessors)

    def validate(self) -> None:
        """Refuse inconsistent configurations at start-up with a message that names the culprit."""
        for name in self.executors:
            if name not in self.specs:
                raise ConfigurationError(
                    f"Hay un ejecutor para la herramienta '{name}' pero ningún fichero JSON la describe."
                )
        for name in self.preprocessors:
            if name not in self.specs:
                raise ConfigurationError(
                    f"Preprocesador para '{name}', herramienta sin especificación."
                )
        for skill in self.skills:
            unknown = [t for t in skill.tools if t not in self.specs]
            if unknown:
                raise ConfigurationError(
                    f"La skill '{skill.name}' ({skill.origin}) nombra herramientas desconocidas: "
                    + ", ".join(unknown)
                )

    # ------------------------------------------------------------------ dynamic tools (MCP)
    def add_tool(self, spec: ToolSpec, executor: Executor | None, *, replace: bool = False) -> bool:
        """Add a tool at run time (MCP). A name collision is skipped with a warning."""
        with self._lock:
            if spec.name in self.specs and not replace:
                log.warning(
                    "La herramienta '%s' de %s choca con la ya registrada de %s: se omite.",
                    spec.name,
                    spec.origin,
                    self.specs[spec.name].origin,
                )
                return False
            self.specs[spec.name] = spec
            self._validators[spec.name] = Draft202012Validator(spec.parameters)
            if executor is not None:
                self.executors[spec.name] = executor
            return True

    def remove_tool(self, name: str) -> None:
        with self._lock:
            self.specs.pop(name, None)
            self.executors.pop(name, None)
            self._validators.pop(name, None)

    # ------------------------------------------------------------------ queries
    def is_server_tool(self, name: str) -> bool:
        return name in self.executors

    def is_map_tool(self, name: str) -> bool:
        return name in self.specs and name not in self.executors

    @property
    def map_tool_names(self) -> list[str]:
        return [n for n in self.specs if n not in self.executors]

    def tool_list(self) -> list[ToolSpec]:
        return list(self.specs.values())

    def active_skills(self, names: list[str] | None = None) -> list[Skill]:
        if not names:
            return list(self.skills)
        wanted = {n.strip() for n in names if n.strip()}
        return [s for s in self.skills if s.name in wanted]

    # ------------------------------------------------------------------ validation and execution
    def check_call(self, call: ToolCall) -> str | None:
        """Return a message for the model when the call cannot run, else None."""
        if call.name not in self.specs:
            known = ", ".join(sorted(self.specs))
            return f"Herramienta desconocida '{call.name}'. Herramientas disponibles: {known}."
        if "__raw__" in call.args and "__raw__" not in self.specs[call.name].parameters.get(
            "properties", {}
        ):  # providers pass unparsable argument text this way (llm/_shared.py)
            return (
                f"Los argumentos de '{call.name}' no son un objeto JSON válido: "
                f"{str(call.args['__raw__'])[:200]!r}. Envía los argumentos como objeto JSON."
            )
        errors = sorted(
            self._validators[call.name].iter_errors(call.args), key=lambda e: list(e.path)
        )
        if errors:
            details = "; ".join(
                f"{'/'.join(str(p) for p in e.absolute_path) or '(argumentos)'}: {e.message}"
                for e in errors[:5]
            )
            return f"Argumentos no válidos para '{call.name}': {details}. Corrige la llamada y vuelve a intentarlo."
        return None

    def preprocess(self, call: ToolCall, ctx: ToolContext) -> ToolCall:
        """Complete a map call's arguments (catalog lookup...). Raises ToolError to answer the model."""
        fn = self.preprocessors.get(call.name)
        if fn is None:
            return call
        return ToolCall(name=call.name, args=fn(dict(call.args), ctx), id=call.id)

    async def execute(self, call: ToolCall, ctx: ToolContext) -> tuple[Any, bool]:
        """Run a server tool; return ``(result, success)``. Never raises for tool failures."""
        fn = self.executors[call.name]
        try:
            if inspect.iscoroutinefunction(fn):
                result = await fn(call.args, ctx)
            else:
                result = await asyncio.to_thread(fn, call.args, ctx)
                if inspect.isawaitable(result):
                    result = await result
        except ToolError as exc:
            return {"success": False, "error": str(exc), **exc.data}, False
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # an executor bug must not kill the turn
            log.exception("La herramienta %s falló", call.name)
            return {"success": False, "error": f"La herramienta '{call.name}' falló: {exc}"}, False
        success = not (isinstance(result, dict) and result.get("success") is False)
        return result, success


__all__ = ["MAP_TOOLS", "ToolContext", "ToolRegistry", "map_tool_preprocessor", "server_tool"]
