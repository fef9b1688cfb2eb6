"""Fixtures for the MCP tests: real fake servers (SDK over HTTP and stdio, the seed's JSON-RPC),
settings pointing at an ``mcp_servers.json``, and an agent driven by a scripted model."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from idee_notebook_agent.config import Settings
from idee_notebook_agent.core.agent import Agent
from idee_notebook_agent.llm.scripted import ScriptedProvider
from idee_notebook_agent.mcp.client import manager_for
from idee_notebook_agent.toolbox.registry import ToolRegistry
from tests.fakes.mcp_server import HttpServerProcess, SeedJsonRpcServer


class NoKnowledge:
    """No knowledge base: these tests are about tools."""

    async def retrieve(self, query: str, k: int) -> list[dict[str, Any]]:
        return []


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpServerProcess]:
    """A real SDK server over streamable HTTP in a child process (shared by a module's tests)."""
    server = HttpServerProcess("fake-http").start()
    yield server
    server.stop()


@pytest.fixture
def own_http_server() -> Iterator[HttpServerProcess]:
    """A server of this test alone: the test may crash or kill it."""
    server = HttpServerProcess("fake-http").start()
    yield server
    server.stop()


@pytest.fixture
def seed_server() -> Iterator[SeedJsonRpcServer]:
    with SeedJsonRpcServer() as server:
        yield server


@pytest.fixture
def write_config(tmp_path: Path):
    """Write ``mcp_servers.json`` and return Settings that point at it."""

    def write(entries: Any) -> Settings:
        path = tmp_path / "mcp_servers.json"
        path.write_text(json.dumps(entries), encoding="utf-8")
        return Settings(mcp_servers_path=path, data_dir=tmp_path / "data")

    return write


@pytest.fixture
def make_agent():
    """An agent whose model is a ScriptedProvider playing ``replies``."""

    def make(settings: Settings, replies: list[Any]) -> tuple[Agent, ScriptedProvider]:
        registry = ToolRegistry.load(settings)
        agent = Agent(settings, tools=registry, retriever=NoKnowledge(), provider="scripted")
        provider = ScriptedProvider(replies, default="(fin)")
        agent.providers.register_instance("scripted", provider)
        return agent, provider

    return make


@pytest.fixture
async def closing():
    """Close, at the end of the test, the MCP connections its agents opened on the test loop."""
    agents: list[Agent] = []
    yield agents.append
    for agent in agents:
        manager = manager_for(agent.tools)
        if manager is not None:
            await manager.aclose()


@pytest.fixture(autouse=True)
def _quiet_sdk_logs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    caplog.set_level(logging.WARNING)
    names = ("mcp", "httpx", "httpx2", "uvicorn")
    levels = {n: logging.getLogger(n).level for n in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.CRITICAL)
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
