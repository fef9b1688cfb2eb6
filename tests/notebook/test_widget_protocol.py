"""The chat widget's message protocol, driven from Python as the browser would drive it."""

from __future__ import annotations

import json
import threading
from typing import Any

import ipywidgets
import pytest

from idee_notebook_agent.core.conversation import AssistantMessage, UserMessage
from idee_notebook_agent.errors import ProviderAuthError
from idee_notebook_agent.notebook.mapchat import MapChat
from idee_notebook_agent.notebook.widget import ChatWidget

from .conftest import IGN_GRIS, front, wait_for

ZOOM_MADRID = {"name": "zoomTo", "args": {"lat": 40.4168, "lon": -3.7038, "zoom": 12}}
LONG = " ".join(f"palabra{i}" for i in range(400))


def idle(chat: Any) -> bool:
    return chat.status == "idle" and chat.current_turn is None


def custom(widget: Any, kind: str | None = None) -> list[dict[str, Any]]:
    messages = widget.comm.custom()
    return [m for m in messages if kind is None or m.get("type") == kind]


@pytest.fixture
def mapchat(make_agent, closing):
    def build(replies: list[Any], **kwargs: Any) -> tuple[MapChat, Any]:
        agent, provider = make_agent(replies, **kwargs)
        return closing(MapChat(agent=agent, provider="scripted")), provider

    return build


def test_user_message_streams_the_answer_and_moves_the_map(mapchat) -> None:
    mc, provider = mapchat([[ZOOM_MADRID], ["Ya estás en **Madrid**."]])
    chat = mc.chat
    front(chat, {"type": "user_message", "text": "Llévame a Madrid"})
    wait_for(lambda: idle(chat) and custom(chat, "turn_end"), what="end of turn")

    assert mc.map.center == [40.4168, -3.7038] and mc.map.zoom == 12
    deltas = "".join(m["text"] for m in custom(chat, "text_delta"))
    assert deltas == "Ya estás en **Madrid**."
    kinds = [m["type"] for m in custom(chat)]
    assert kinds[0] == "turn_start" and kinds[-1] == "turn_end"
    assert kinds.index("tool_call") < kinds.index("tool_result") < kinds.index("text_delta")

    items = chat.messages
    assert [i["kind"] for i in items] == ["user", "assistant", "assistant"]
    assert items[0]["text"] == "Llévame a Madrid"
    chip = items[1]["calls"][0]
    assert chip["name"] == "zoomTo" and chip["status"] == "done"
    assert json.loads(chip["result"])["success"] is True
    assert items[2]["text"] == "Ya estás en **Madrid**."
    # the model saw the map state in degrees
    assert provider.requests[0].map_state["srs"] == "EPSG:4326"
    assert provider.requests[0].map_state["layers"] == ["basemap"]


def test_add_layer_from_a_definition_appears_on_the_map(mapchat) -> None:
    mc, _ = mapchat([[{"name": "addLayer", "args": IGN_GRIS}], ["Capa IGNBaseGris añadida."]])
    turn = mc.ask("carga la capa IGNBaseGris", timeout=10)
    assert turn.answer == "Capa IGNBaseGris añadida."
    assert "LAYER=IGNBase-gris" in mc.map.layers[-1].url
    assert [layer["name"] for layer in mc.port.tool_listActiveLayers()] == [
        "basemap",
        "IGNBase-gris",
    ]


def test_a_failing_tool_is_a_failed_chip_and_the_turn_goes_on(mapchat) -> None:
    bad = {"name": "addLayer", "args": {"type": "WMTS", "name": "sin-url"}}
    mc, provider = mapchat([[bad], ["No pude cargarla: falta la url."]])
    turn = mc.ask("carga algo", timeout=10)
    assert turn.answer == "No pude cargarla: falta la url."
    chip = mc.chat.messages[1]["calls"][0]
    assert chip["status"] == "failed" and "url" in chip["result"]
    # the model read the error as the tool result
    assert "url" in provider.requests[1].messages[-1].result["error"]


def test_stop_cancels_a_slow_reply_and_keeps_what_was_said(mapchat) -> None:
    mc, provider = mapchat([[LONG], ["Sigo aquí."]], delay=0.02)
    chat = mc.chat
    front(chat, {"type": "user_message", "text": "Cuéntame algo largo"})
    wait_for(lambda: len(custom(chat, "text_delta")) >= 5, what="some streamed text")
    front(chat, {"type": "stop"})
    wait_for(lambda: idle(chat), what="the turn to stop")

    streamed = "".join(m["text"] for m in custom(chat, "text_delta"))
    assert 0 < len(streamed) < len(LONG)
    end = custom(chat, "turn_end")[-1]
    assert end["stopped"] is True
    assert provider.closed_streams == 1  # the model's stream was closed: no more tokens
    assert chat.runner.pending_tasks() == 0  # no orphan task
    saved = [m for m in chat.conversation.messages if isinstance(m, AssistantMessage)]
    assert saved and LONG.startswith(saved[-1].text) and saved[-1].text
    assert chat.messages[-1]["kind"] == "notice" and chat.messages[-1]["code"] == "stopped"

    # the conversation survives: the next message is answered with the history intact
    turn = chat.ask("¿Sigues ahí?", timeout=10)
    assert turn.answer == "Sigo aquí."
    assert [type(m).__name__ for m in provider.requests[-1].messages] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
    ]


def test_a_new_message_while_running_replaces_the_running_turn(mapchat) -> None:
    mc, provider = mapchat([[LONG], ["Segunda respuesta."]], delay=0.02)
    chat = mc.chat
    first = chat.submit("primera")
    wait_for(lambda: first.answer, what="first text")
    second = chat.submit("segunda")
    assert second.wait(10) and first.wait(10)
    assert first.stopped and not second.stopped
    assert second.answer == "Segunda respuesta."
    assert idle(chat)
    assert provider.closed_streams == 2


def test_model_errors_are_shown_in_the_chat_and_the_conversation_survives(mapchat) -> None:
    error = ProviderAuthError("La clave de API no es válida. Revisa la clave en los ajustes.")
    mc, _ = mapchat([["Hola, ", error], ["Ahora sí."]])
    chat = mc.chat
    front(chat, {"type": "user_message", "text": "hola"})
    wait_for(lambda: idle(chat) and custom(chat, "turn_end"), what="end of turn")
    notices = [i for i in chat.messages if i["kind"] == "notice"]
    assert notices[-1]["level"] == "error" and "clave de API" in notices[-1]["text"]
    assert custom(chat, "error")[-1]["code"] == "auth"
    assert chat.ask("otra vez", timeout=10).answer == "Ahora sí."


def test_an_unexpected_failure_is_a_notice_not_a_traceback(mapchat) -> None:
    mc, _ = mapchat([[RuntimeError("boom")]])
    turn = mc.ask("hola", timeout=10)
    assert turn.errors and "boom" in turn.errors[0]
    assert mc.chat.messages[-1]["kind"] == "notice" and mc.chat.messages[-1]["level"] == "error"
    assert idle(mc.chat)


def test_new_conversation_and_history(mapchat) -> None:
    mc, _ = mapchat([["Primera."], ["Segunda."], ["Tercera."]])
    chat = mc.chat
    chat.ask("uno", timeout=10)
    first_id = chat.conversation_id
    front(chat, {"type": "new_conversation"})
    assert chat.conversation_id != first_id and chat.messages == []
    chat.ask("dos", timeout=10)
    assert [c["title"] for c in chat.conversations] == ["dos", "uno"]
    front(chat, {"type": "select_conversation", "id": first_id})
    assert chat.conversation_id == first_id
    assert [i.get("text") for i in chat.messages] == ["uno", "Primera."]
    chat.ask("tres", timeout=10)  # continues the selected conversation
    assert [m.text for m in chat.conversation.messages if isinstance(m, UserMessage)] == [
        "uno",
        "tres",
    ]


def test_select_provider_and_model(make_agent, closing) -> None:
    agent, provider = make_agent([["a"], ["b"]])
    agent.providers.register_instance("otro", provider, default_model="otro-modelo")
    chat = closing(ChatWidget(agent, provider="scripted"))
    assert {p["name"] for p in chat.providers} >= {"scripted", "otro", "offline"}
    front(chat, {"type": "select_provider", "provider": "otro", "model": ""})
    assert chat.provider == "otro" and chat.model == "otro-modelo"
    front(chat, {"type": "select_provider", "provider": "otro", "model": "m-2"})
    chat.ask("hola", timeout=10)
    assert provider.requests[-1].model == "m-2"
    front(chat, {"type": "select_provider", "provider": "no-existe"})
    assert chat.provider == "otro"
    assert "no-existe" in chat.messages[-1]["text"] and chat.messages[-1]["level"] == "error"


def test_api_key_is_tested_kept_in_memory_and_never_synced(make_agent, closing) -> None:
    secret = "sk-test-ABCDEF0123456789"
    seen: list[tuple[str, str]] = []

    async def tester(registry: Any, provider: str, api_key: str) -> dict[str, Any]:
        seen.append((provider, api_key))
        if api_key == secret:
            return {"valid": True, "models": ["m-b", "m-a"]}
        return {"valid": False, "error": "HTTP 401: API key rechazada para 'scripted'"}

    agent, _ = make_agent([["ok"]])
    chat = closing(ChatWidget(agent, provider="scripted", key_tester=tester))
    front(chat, {"type": "test_key", "provider": "scripted", "api_key": "sk-wrong"})
    wait_for(lambda: custom(chat, "key_test"), what="key test reply")
    assert custom(chat, "key_test")[-1] == {
        "type": "key_test",
        "provider": "scripted",
        "valid": False,
        "error": "HTTP 401: API key rechazada para 'scripted'",
    }
    assert chat.keys_set == []

    front(chat, {"type": "test_key", "provider": "scripted", "api_key": f"  {secret} "})
    wait_for(lambda: len(custom(chat, "key_test")) == 2, what="second key test reply")
    assert seen[-1] == ("scripted", secret)
    assert chat.keys_set == ["scripted"]
    assert chat.key_status["valid"] is True and chat.key_status["models"] == ["m-b", "m-a"]
    assert chat._key_for("scripted") == secret

    # the key is in no synced state, in no message to the browser, in no saved conversation
    chat.ask("hola", timeout=10)
    state = json.dumps(ipywidgets.Widget.get_manager_state(), default=str)
    sent = json.dumps(chat.comm.sent, default=str)
    assert chat.comm.sent and state
    for text in (state, sent, chat.conversation.to_json(), repr(chat.__dict__)):
        assert secret not in text

    front(chat, {"type": "clear_key", "provider": "scripted"})
    assert chat.keys_set == [] and chat._key_for("scripted") is None


def test_key_test_without_a_key_is_refused_politely(make_agent, closing) -> None:
    agent, _ = make_agent()
    chat = closing(ChatWidget(agent, provider="scripted"))
    front(chat, {"type": "test_key", "provider": "scripted", "api_key": "   "})
    assert chat.key_status["valid"] is False and "clave" in chat.key_status["message"]
    # a keyless provider answers that it needs no key (default tester)
    front(chat, {"type": "test_key", "provider": "offline", "api_key": "sk-x"})
    wait_for(lambda: custom(chat, "key_test"), what="key test reply")
    assert custom(chat, "key_test")[-1]["valid"] is False
    assert chat.keys_set == []


def test_language_switch_changes_kernel_messages(mapchat) -> None:
    mc, _ = mapchat([[LONG]], delay=0.02)
    chat = mc.chat
    front(chat, {"type": "set_language", "language": "en"})
    assert chat.language == "en"
    turn = chat.submit("long story")
    wait_for(lambda: turn.answer, what="text")
    chat.stop(wait=10)
    assert chat.messages[-1]["text"].startswith("Reply stopped")
    front(chat, {"type": "set_language", "language": "xx"})
    assert chat.language == "es"


def test_malformed_messages_are_ignored_or_explained(mapchat) -> None:
    mc, _ = mapchat([["ok"]])
    chat = mc.chat
    front(chat, "texto suelto")
    front(chat, {"type": "desconocido"})
    front(chat, {"type": "select_conversation", "id": "no-existe"})
    assert chat.messages[-1]["level"] == "error" and "no-existe" in chat.messages[-1]["text"]
    front(chat, {"type": "user_message", "text": "   "})
    wait_for(lambda: idle(chat) and custom(chat, "turn_end"), what="end of turn")
    assert custom(chat, "error")[-1]["code"] == "empty_message"
    assert chat.ask("hola", timeout=10).answer == "ok"


def test_raw_html_from_the_model_is_kept_as_text(mapchat) -> None:
    html = '<img src=x onerror="alert(1)"> <script>alert(2)</script>'
    mc, _ = mapchat([[html]])
    mc.ask("hola", timeout=10)
    assert mc.chat.messages[-1]["text"] == html  # the browser renders it as text (e2e test)


def test_handlers_return_at_once_while_a_turn_runs(mapchat) -> None:
    mc, _ = mapchat([[LONG]], delay=0.05)
    chat = mc.chat
    done = threading.Event()

    def user_types() -> None:
        front(chat, {"type": "user_message", "text": "cuenta"})
        done.set()

    thread = threading.Thread(target=user_types)
    thread.start()
    assert done.wait(5)  # the handler returned while the turn still streams
    assert chat.status == "running"
    front(chat, {"type": "stop"})
    wait_for(lambda: idle(chat), what="stop")
    thread.join(5)


def test_close_ends_the_runner_thread(make_agent) -> None:
    agent, _ = make_agent([[LONG]], delay=0.05)
    chat = ChatWidget(agent, provider="scripted")
    turn = chat.submit("largo")
    wait_for(lambda: turn.answer, what="text")
    thread = chat.runner.thread
    assert thread is not None and thread.is_alive()
    chat.close()
    assert turn.done and turn.stopped
    assert not thread.is_alive()


def test_catalog_names_are_completed_before_the_map_runs_them(mapchat) -> None:
    pytest.importorskip("idee_notebook_agent.services.catalog")
    mc, _ = mapchat([[{"name": "addLayer", "args": {"name": "IGNBaseGris"}}], ["Hecho."]])
    assert mc.ask("carga la capa IGNBaseGris", timeout=10).answer == "Hecho."
    layer = mc.map.layers[-1]
    assert "LAYER=IGNBase-gris" in layer.url and "TILEMATRIXSET=GoogleMapsCompatible" in layer.url
    assert mc.chat.messages[1]["calls"][0]["status"] == "done"


def test_users_own_map_tools_run_when_registered(make_agent, closing, tmp_path) -> None:
    spec = {
        "name": "setOpacity",
        "description": "Cambia la opacidad del mapa base.",
        "parameters": {"type": "object", "properties": {"opacity": {"type": "number"}}},
    }
    (tmp_path / "setOpacity.json").write_text(json.dumps(spec), encoding="utf-8")
    call = {"name": "setOpacity", "args": {"opacity": 0.4}}
    agent, provider = make_agent([[call], ["No pude."], [call], ["Hecho."]], tool_dirs=[tmp_path])
    mc = closing(MapChat(agent=agent, provider="scripted"))
    assert mc.ask("más transparente", timeout=10).answer == "No pude."
    chip = mc.chat.messages[1]["calls"][0]
    assert chip["status"] == "failed" and "no está disponible" in chip["result"]

    def set_opacity(args: dict, m: Any) -> dict:
        m.layers[0].opacity = float(args["opacity"])
        return {"success": True, "opacity": m.layers[0].opacity}

    mc.port.register_tool("setOpacity", set_opacity)
    assert mc.ask("más transparente", timeout=10).answer == "Hecho."
    assert mc.map.layers[0].opacity == 0.4
    assert provider.requests[-1].messages[-1].result == {"success": True, "opacity": 0.4}


def test_ui_language_defaults_to_the_setting(monkeypatch):
    from idee_notebook_agent.config import Settings
    from idee_notebook_agent.core.agent import Agent
    from idee_notebook_agent.core.headless_map import HeadlessMapPort
    from idee_notebook_agent.notebook.widget import ChatWidget

    agent = Agent(Settings(_env_file=None, IDEE_LANGUAGE="en"), retriever=None)
    widgets = [
        ChatWidget(agent, HeadlessMapPort()),
        ChatWidget(agent, HeadlessMapPort(), language="es"),
    ]
    try:
        assert [w.language for w in widgets] == ["en", "es"]
    finally:
        for widget in widgets:
            widget.close()
