from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from idee_notebook_agent.llm.scripted import ScriptedProvider
from idee_notebook_agent.server.app import create_app
from idee_notebook_agent.server.background import BackgroundServer
from tests.fakes.openai_server import openai_fake  # noqa: F401  (fixture for the tests here)
from tests.fakes.server_agent import build_agent, server_settings

MADRID_3857 = {"center": {"lat": 4927000.0, "lon": -412000.0}, "zoom": 6, "srs": "EPSG:3857"}


@pytest.fixture
def settings(tmp_path: Path):
    return server_settings(tmp_path)


@pytest.fixture
def provider() -> ScriptedProvider:
    return ScriptedProvider()


@pytest.fixture
def executors() -> dict[str, Any]:
    """Server-tool executors for this test (override in a test module to add some)."""
    return {}


@pytest.fixture
def retriever():
    return None


@pytest.fixture
def agent(settings, provider, executors, retriever):
    return build_agent(settings, provider, executors=executors, retriever=retriever)


@pytest.fixture
def app(settings, agent):
    return create_app(settings, agent, keepalive_seconds=0.2)


@pytest.fixture
async def client(app) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


@pytest.fixture
def live(app) -> Iterator[BackgroundServer]:
    with BackgroundServer(app) as server:
        yield server


async def new_conversation(client: httpx.AsyncClient, base: str = "/api") -> str:
    r = await client.post(f"{base}/conversations/", json={})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Parse an SSE body strictly as the plugin does: blocks of ``event:``/``data:`` lines."""
    import json

    assert "\r" not in text
    events = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        lines = block.split("\n")
        if all(line.startswith(":") for line in lines):
            continue  # keep-alive comment
        assert len(lines) == 2, block
        assert lines[0].startswith("event: "), block
        assert lines[1].startswith("data: "), block
        name = lines[0][len("event: ") :]
        data = json.loads(lines[1][len("data: ") :])
        assert data["type"] == name
        events.append((name, data))
    return events
