"""Skills: one YAML file per skill (``name``, ``description``, ``tools``, ``prompt``), seed format."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import ConfigurationError

log = logging.getLogger(__name__)


@dataclass
class Skill:
    name: str
    description: str = ""
    tools: list[str] = field(default_factory=list)
    prompt: str = ""
    origin: str = "builtin"

    def prompt_block(self) -> str:
        return f"### Skill: {self.name}\n{self.prompt.strip()}"


def load_skills(folders: list[Path]) -> list[Skill]:
    """Load ``*.yaml``/``*.yml`` in file-name order; files without ``name`` and repeats are skipped."""
    skills: list[Skill] = []
    names: set[str] = set()
    for folder in folders:
        if not folder.is_dir():
            raise ConfigurationError(f"La carpeta de skills '{folder}' no existe.")
        paths = sorted(
            [*folder.rglob("*.yaml"), *folder.rglob("*.yml")], key=lambda p: (p.name, str(p))
        )
        for path in paths:
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError) as exc:
                raise ConfigurationError(f"No se pudo leer la skill {path}: {exc}") from exc
            if not isinstance(data, dict) or not data.get("name"):
                continue
            if data["name"] in names:
                log.warning("Skill '%s' repetida en %s: se ignora.", data["name"], path)
                continue
            tools = data.get("tools") or []
            if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
                raise ConfigurationError(f"La skill {path}: 'tools' debe ser una lista de nombres.")
            names.add(data["name"])
            skills.append(
                Skill(
                    name=str(data["name"]),
                    description=str(data.get("description", "")),
                    tools=list(tools),
                    prompt=str(data.get("prompt", "")),
                    origin=str(path),
                )
            )
    return skills
