"""Helpers shared by the provider tests."""

from __future__ import annotations

from typing import Any

from idee_notebook_agent.config import Settings
from idee_notebook_agent.core.agent import Agent
from idee_notebook_agent.llm.registry import ProviderRegistry
from idee_notebook_agent.toolbox.registry import ToolRegistry


def make_settings(**env: Any) -> Settings:
    """Settings from the given variables only (no ``.env`` file)."""
    env.setdefault("IDEE_LLM_TIMEOUT", 10)
    env.setdefault("IDEE_LLM_MAX_RETRIES", 0)
    return Settings(_env_file=None, **env)


class NoKnowledge:
    """The retrieval hook answering nothing: these tests are about providers, not RAG."""

    async def retrieve(self, query: str, k: int) -> list[dict[str, Any]]:
        return []


def make_agent(settings: Settings, providers: ProviderRegistry | None = None) -> Agent:
    return Agent(
        settings,
        tools=ToolRegistry.load(settings, include_builtin_executors=False),
        providers=providers or ProviderRegistry.from_settings(settings),
        retriever=NoKnowledge(),
    )


async def run_turn(agent: Agent, conversation: Any, text: str, **kwargs: Any) -> list[Any]:
    return [event async for event in agent.stream(conversation, text, **kwargs)]
