"""Fixtures for the notebook front end: a recording comm, scripted agents and real Leaflet maps.

``comm.create_comm`` is the documented hook for a Jupyter comm implementation; the recording comm
keeps every message the kernel side would publish, and ``front()`` delivers a message the way the
kernel's comm manager does (``comm.handle_msg``), so the widget's real handlers run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm

from idee_notebook_agent.config import Settings
from idee_notebook_agent.core.agent import Agent
from idee_notebook_agent.llm.scripted import ScriptedProvider
from idee_notebook_agent.toolbox.registry import ToolRegistry

IGN_GRIS = {
    "type": "WMTS",
    "url": "https://www.ign.es/wmts/ign-base?",
    "name": "IGNBase-gris",
    "legend": "Mapa Base de España – IGNBaseGris",
    "format": "image/jpeg",
    "matrixSet": "GoogleMapsCompatible",
}


class RecordingComm(BaseComm):
    """A comm that records what it would send to the browser."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self._sent_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any) -> None:  # fmt: skip
        with self._sent_lock:
            self.sent.append((msg_type, data or {}))

    def custom(self) -> list[dict[str, Any]]:
        """The custom messages (``widget.send``) in order."""
        with self._sent_lock:
            return [
                d["content"]
                for t, d in self.sent
                if t == "comm_msg" and d.get("method") == "custom"
            ]


@pytest.fixture(autouse=True)
def recording_comm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comm, "create_comm", RecordingComm)


def front(widget: Any, content: Any) -> None:
    """Deliver a browser custom message to ``widget`` through its comm."""
    widget.comm.handle_msg(
        {
            "content": {
                "comm_id": widget.comm.comm_id,
                "data": {"method": "custom", "content": content},
            },
            "buffers": [],
        }  # fmt: skip
    )


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it is truthy (the agent runs on its own thread)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError(f"Timed out waiting for {what}")


@pytest.fixture
def settings(tmp_path: Any) -> Settings:
    return Settings(
        _env_file=None,
        data_dir=tmp_path / "data",
        cache_dir=tmp_path / "cache",
        basemap_url="http://127.0.0.1:9/{z}/{x}/{y}.png",
        mcp_servers_path=None,
        providers_file=None,
    )


@pytest.fixture
def make_agent(settings: Settings) -> Callable[..., tuple[Agent, ScriptedProvider]]:
    """An Agent whose 'scripted' provider plays back ``replies`` (see ScriptedProvider)."""

    def build(
        replies: list[Any] | None = None,
        *,
        delay: float = 0.0,
        executors: dict[str, Any] | None = None,
        default: str = "",
        tool_dirs: list[Any] | None = None,
    ) -> tuple[Agent, ScriptedProvider]:
        tools = ToolRegistry.load(settings, executors=executors or {}, tool_dirs=tool_dirs)
        agent = Agent(settings, tools=tools, retriever=None, provider="scripted")
        agent.retriever = None
        provider = ScriptedProvider(replies or [], delay=delay, default=default)
        agent.providers.register_instance("scripted", provider)
        return agent, provider

    return build


@pytest.fixture
def closing() -> Iterator[Callable[[Any], Any]]:
    """Close widgets at the end of a test (their runner threads end with them)."""
    widgets: list[Any] = []

    def keep(widget: Any) -> Any:
        widgets.append(widget)
        return widget

    yield keep
    for widget in widgets:
        widget.close()
