"""The chat with the real OpenAI client against the loopback OpenAI-compatible fake: the Test
button checks the key against the model list, the key is then used for the turns (and only kept
in kernel memory), and Stop closes the HTTP stream so no more tokens are billed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import ipywidgets
import pytest

from idee_notebook_agent.core.agent import Agent
from idee_notebook_agent.llm.registry import ProviderConfig, ProviderRegistry
from idee_notebook_agent.notebook.mapchat import MapChat
from idee_notebook_agent.toolbox.registry import ToolRegistry

from .conftest import front, wait_for

openai_server = pytest.importorskip("tests.fakes.openai_server")
pytest.importorskip("idee_notebook_agent.llm.keytest")
pytest.importorskip("idee_notebook_agent.llm.openai_provider")

SECRET = "sk-user-notebook-7f3a9c"


@pytest.fixture
def fake() -> Iterator[Any]:
    server = openai_server.FakeOpenAIServer(valid_keys={SECRET}).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def chat(fake: Any, settings: Any, closing: Any) -> MapChat:
    config = ProviderConfig(
        name="fake-openai", kind="openai", base_url=fake.url, default_model="fake-model"
    )
    registry = ProviderRegistry([config], settings)
    agent = Agent(settings, tools=ToolRegistry.load(settings), providers=registry)
    agent.retriever = None
    return closing(MapChat(agent=agent, provider="fake-openai"))


def key_replies(widget: Any) -> list[dict[str, Any]]:
    return [m for m in widget.comm.custom() if m.get("type") == "key_test"]


def test_key_is_checked_used_and_never_synced(chat: MapChat, fake: Any) -> None:
    widget = chat.chat
    front(widget, {"type": "test_key", "provider": "fake-openai", "api_key": "sk-wrong"})
    wait_for(lambda: key_replies(widget), what="key test")
    assert key_replies(widget)[-1]["valid"] is False
    assert "401" in key_replies(widget)[-1]["error"]

    front(widget, {"type": "test_key", "provider": "fake-openai", "api_key": SECRET})
    wait_for(lambda: len(key_replies(widget)) == 2, what="second key test")
    assert key_replies(widget)[-1]["valid"] is True
    assert "fake-model" in widget.key_status["models"]
    assert widget.keys_set == ["fake-openai"]

    fake.queue(
        openai_server.OpenAIReply(
            tool_calls=[
                openai_server.FakeToolCall("zoomTo", {"lat": 37.3886, "lon": -5.9823, "zoom": 13})
            ]  # fmt: skip
        ),
        openai_server.OpenAIReply(text="Ya estás en Sevilla."),
    )
    turn = chat.ask("Llévame a Sevilla", timeout=20)
    assert turn.answer == "Ya estás en Sevilla.", turn.errors
    assert chat.map.center == [37.3886, -5.9823] and chat.map.zoom == 13
    chat_keys = [
        k for r, k in zip(fake.requests, fake.bearer_keys(), strict=True) if "chat" in r.path
    ]
    assert chat_keys == [SECRET, SECRET]  # the user's key, for this kernel's turns

    state = json.dumps(ipywidgets.Widget.get_manager_state(), default=str)
    assert SECRET not in state and SECRET not in json.dumps(widget.comm.sent, default=str)
    assert SECRET not in chat.conversation.to_json()


def test_without_a_valid_key_the_error_is_shown_and_nothing_breaks(
    chat: MapChat, fake: Any
) -> None:
    turn = chat.ask("hola", timeout=20)
    assert turn.errors and not turn.answer
    notice = chat.chat.messages[-1]
    assert notice["kind"] == "notice" and notice["level"] == "error"
    assert "Traceback" not in notice["text"]
    assert chat.chat.status == "idle"


def test_stop_closes_the_model_stream(chat: MapChat, fake: Any) -> None:
    chat.chat.set_api_key("fake-openai", SECRET)
    fake.queue(openai_server.OpenAIReply(text="palabra " * 300, chunk_size=8, delay=0.03))
    turn = chat.submit("cuéntame algo largo")
    wait_for(lambda: len(turn.answer) > 20, timeout=20, what="streamed text")
    chat.stop(wait=10)
    assert turn.done and turn.stopped
    assert fake.disconnected.wait(10)  # the HTTP stream was closed: no more tokens billed
    kept = chat.conversation.messages[-1]
    assert kept.text and len(kept.text) < len("palabra " * 300)
    assert chat.chat.runner.pending_tasks() == 0
