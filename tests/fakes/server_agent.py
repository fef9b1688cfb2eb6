"""An ``Agent`` for server tests: the scripted model as provider ``fake`` / model ``fake-model``.

Only our own tool specs and skills are loaded (no built-in server executors), so the server's
tests do not depend on the services being reachable; tests add the executors they need.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from idee_notebook_agent.config import Settings
from idee_notebook_agent.core.agent import Agent
from idee_notebook_agent.llm.registry import ProviderConfig, ProviderRegistry
from idee_notebook_agent.llm.scripted import ScriptedProvider
from idee_notebook_agent.toolbox.registry import ToolRegistry

SOURCE = {"source": "docs/x.md", "chunk_index": 3, "language": "markdown"}


class StaticRetriever:
    """Knowledge that always returns the same chunk (its metadata becomes ``sources``)."""

    def __init__(self, chunks: list[dict[str, Any]] | None = None) -> None:
        self.chunks = chunks if chunks is not None else [{**SOURCE, "content": "Texto de x.md"}]

    async def retrieve(self, query: str, k: int) -> list[dict[str, Any]]:
        return [dict(c) for c in self.chunks[:k]]


def server_settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": f"sqlite:///{tmp_path / 'server.sqlite3'}",
        "llm_provider": "fake",
        "data_dir": tmp_path / "data",
        "cache_dir": tmp_path / "cache",
        "mcp_servers_path": None,
        "providers_file": None,
        "tools_dirs": "",
        "skills_dirs": "",
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)


def build_agent(
    settings: Settings,
    provider: ScriptedProvider,
    *,
    executors: dict[str, Any] | None = None,
    retriever: Any = None,
    configs: list[ProviderConfig] | None = None,
) -> Agent:
    """``configs`` adds real providers (e.g. an OpenAI-compatible one on a loopback fake)."""
    tools = ToolRegistry.load(settings, include_builtin_executors=False, executors=executors)
    providers = ProviderRegistry(list(configs or []), settings, default="fake")
    providers.register_instance("fake", provider, default_model="fake-model")
    return Agent(
        settings, tools=tools, providers=providers, retriever=retriever or StaticRetriever([])
    )
