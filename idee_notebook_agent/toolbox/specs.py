"""Tool specs: one JSON file per tool, ``{"name", "description", "parameters"}`` (seed format)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ..errors import ConfigurationError

EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass
class ToolSpec:
    """What the model sees of a tool. ``flags`` keeps ``x-*`` metadata (e.g. x-long-running)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: dict(EMPTY_PARAMETERS))
    flags: dict[str, Any] = field(default_factory=dict)
    origin: str = "builtin"

    @property
    def long_running(self) -> bool:
        return bool(self.flags.get("x-long-running"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
            **self.flags,
        }

    def openai_tool(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], origin: str = "builtin") -> ToolSpec:
        if not isinstance(data, dict) or not data.get("name"):
            raise ConfigurationError(
                f"La especificación de herramienta de {origin} no tiene 'name'."
            )
        parameters = data.get("parameters") or dict(EMPTY_PARAMETERS)
        try:
            Draft202012Validator.check_schema(parameters)
        except SchemaError as exc:
            raise ConfigurationError(
                f"El JSON Schema de la herramienta '{data['name']}' ({origin}) no es válido: {exc.message}"
            ) from exc
        if parameters.get("type") != "object":
            raise ConfigurationError(
                f"Los parámetros de la herramienta '{data['name']}' ({origin}) deben ser un objeto JSON Schema "
                'con "type": "object".'
            )
        flags = {k: v for k, v in data.items() if k.startswith("x-")}
        return cls(
            name=str(data["name"]),
            description=str(data.get("description", "")),
            parameters=parameters,
            flags=flags,
            origin=origin,
        )


def load_tool_specs(folders: list[Path]) -> list[ToolSpec]:
    """Load every ``*.json`` below each folder, in file-name order; duplicates are an error."""
    specs: list[ToolSpec] = []
    seen: dict[str, str] = {}
    for folder in folders:
        if not folder.is_dir():
            raise ConfigurationError(f"La carpeta de herramientas '{folder}' no existe.")
        for path in sorted(folder.rglob("*.json"), key=lambda p: (p.name, str(p))):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise ConfigurationError(f"No se pudo leer la herramienta {path}: {exc}") from exc
            if isinstance(data, dict) and not data.get("name"):
                continue  # the seed skips files without a name
            spec = ToolSpec.from_dict(data, origin=str(path))
            if spec.name in seen:
                raise ConfigurationError(
                    f"Herramienta duplicada '{spec.name}': {seen[spec.name]} y {path}."
                )
            seen[spec.name] = str(path)
            specs.append(spec)
    return specs
