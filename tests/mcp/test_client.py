"""External MCP servers in the agent loop: discovery, a full turn, collisions, failures, fallback.

Every server here is real: the SDK's ``MCPServer`` over streamable HTTP or stdio in a child
process (``tests/fakes/mcp_server.py``), or the seed's plain JSON-RPC server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

import httpx
import pytest

from idee_notebook_agent.config import Settings
from idee_notebook_agent.core.agent import Agent
from idee_notebook_agent.core.conversation import Conversation, ToolCall, ToolResultMessage
from idee_notebook_agent.core.events import (
    DoneEvent,
    ErrorEvent,
    Event,
    TextDelta,
    ToolCallEvent,
    ToolResultEvent,
)
from idee_notebook_agent.llm.base import ChatRequest
from idee_notebook_agent.mcp.client import manager_for
from tests.fakes.mcp_server import HttpServerProcess, free_port, serve_asgi, stdio_params


def tell_last_result(request: ChatRequest) -> list[Any]:
    """A model reply that repeats the last tool result it was given, like a real model would."""
    last = next(m for m in reversed(request.messages) if isinstance(m, ToolResultMessage))
    return [f"Resultado de {last.name}: {json.dumps(last.result, ensure_ascii=False)}"]


async def turn(agent: Agent, conversation: Conversation, text: str) -> list[Event]:
    return [e async for e in agent.stream(conversation, text)]


def tool_results(events: list[Event]) -> list[ToolResultEvent]:
    return [e for e in events if isinstance(e, ToolResultEvent)]


def answer(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# ---------------------------------------------------------------------------------------------
# discovery and registration


async def test_discovery_registers_mcp_tools_beside_the_native_ones(
    http_server, write_config, make_agent, closing, caplog
):
    settings = write_config([{"name": "fake-http", "url": http_server.url, "timeout": 10}])
    agent, _ = make_agent(settings, [])
    closing(agent)
    await agent.start()

    specs = agent.tools.specs
    for name in ("echo", "add", "picture", "fail", "slow", "crash"):
        assert specs[name].origin == "mcp:fake-http"
        assert agent.tools.is_server_tool(name)
    assert specs["echo"].parameters["properties"]["text"]["type"] == "string"
    assert specs["echo"].parameters["required"] == ["text"]
    assert "fake-http" in specs["echo"].description
    # native tools are still there, and the colliding MCP one did not replace the map tool
    assert specs["geocodePlace"].origin.endswith("geocodePlace.json")
    assert specs["zoomTo"].origin.endswith("zoomTo.json")
    assert agent.tools.is_map_tool("zoomTo")
    warnings = [r.getMessage() for r in caplog.records if "zoomTo" in r.getMessage()]
    assert len(warnings) == 1
    assert "mcp:fake-http" in warnings[0] and "zoomTo.json" in warnings[0]
    status = manager_for(agent.tools).status()[0]
    assert status["status"] == "connected" and status["transport"] == "http"
    assert {t["name"]: t["registered"] for t in status["tools"]}["zoomTo"] is False


async def test_two_servers_with_the_same_tool_keep_the_first_and_warn_naming_both(
    http_server, write_config, make_agent, closing, caplog
):
    settings = write_config(
        [
            {"name": "fake-http", "url": http_server.url, "timeout": 10},
            {**stdio_params("fake-stdio"), "timeout": 30},
        ]
    )
    agent, _ = make_agent(settings, [])
    closing(agent)
    await agent.start()

    assert agent.tools.specs["echo"].origin == "mcp:fake-http"
    echo_warnings = [r.getMessage() for r in caplog.records if "'echo'" in r.getMessage()]
    assert len(echo_warnings) == 1
    assert "mcp:fake-stdio" in echo_warnings[0] and "mcp:fake-http" in echo_warnings[0]
    stdio = manager_for(agent.tools).server("fake-stdio")
    assert stdio.status == "connected" and stdio.registered == []


# ---------------------------------------------------------------------------------------------
# the agent loop


async def test_agent_turn_runs_the_mcp_tool_in_the_loop_and_feeds_the_result_back(
    http_server, write_config, make_agent, closing
):
    settings = write_config([{"name": "fake-http", "url": http_server.url, "timeout": 10}])
    agent, model = make_agent(
        settings, [[ToolCall("echo", {"text": "hola"}, "call_echo")], tell_last_result]
    )
    closing(agent)
    conversation = Conversation()

    events = await turn(agent, conversation, "Repite hola con la herramienta externa")

    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert len(calls) == 1 and calls[0].awaiting_client is False
    assert calls[0].calls[0].name == "echo"
    (result,) = tool_results(events)
    assert result.success is True
    assert result.result["data"] == {"result": "eco: hola"}
    assert result.result["server"] == "fake-http"
    assert "eco: hola" in answer(events)
    assert isinstance(events[-1], DoneEvent) and events[-1].pending is False
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    assert "echo" in [s.name for s in model.requests[0].tools]
    stored = [m for m in conversation.messages if isinstance(m, ToolResultMessage)]
    assert stored[0].call_id == "call_echo" and stored[0].success is True


async def test_results_keep_json_summarise_images_and_pass_tool_errors(
    http_server, write_config, make_agent, closing
):
    settings = write_config([{"name": "fake-http", "url": http_server.url, "timeout": 10}])
    agent, _ = make_agent(
        settings,
        [
            [
                ToolCall("add", {"a": 2, "b": 3.5}),
                ToolCall("picture", {}),
                ToolCall("fail", {"reason": "prueba"}),
            ],
            ["hecho"],
        ],
    )
    closing(agent)

    added, picture, failed = tool_results(await turn(agent, Conversation(), "varias"))

    assert added.success and added.result["data"] == {"sum": 5.5}
    assert "text" not in added.result  # the JSON text repeats the structured content
    assert picture.success and picture.result["text"] == "una imagen de 1x1"
    assert picture.result["media"][0]["mimeType"] == "image/png"
    assert picture.result["media"][0]["summary"].startswith("[imagen image/png")
    assert failed.success is False
    assert "fallo pedido: prueba" in failed.result["error"]
    assert "fake-http" in failed.result["error"]


def test_agent_ask_runs_turns_in_fresh_event_loops(write_config, make_agent):
    """``Agent.ask`` uses ``asyncio.run`` per turn: each turn reconnects on its own loop."""
    settings = write_config([{**stdio_params("fake-stdio"), "timeout": 30}])
    agent, _ = make_agent(
        settings,
        [
            [ToolCall("echo", {"text": "uno"})],
            tell_last_result,
            [ToolCall("echo", {"text": "dos"})],
            tell_last_result,
        ],
    )
    conversation = Conversation()

    first = agent.ask("primero", conversation)
    second = agent.ask("segundo", conversation)

    assert first.errors == [] and second.errors == []
    assert "eco: uno" in first.text
    assert "eco: dos" in second.text
    assert manager_for(agent.tools).server("fake-stdio").status == "connected"


async def test_turns_on_a_background_thread_loop_and_on_this_loop(
    http_server, write_config, make_agent, closing
):
    """The notebook runs the agent on its own background-thread loop; the server on uvicorn's."""
    settings = write_config([{"name": "fake-http", "url": http_server.url, "timeout": 10}])
    agent, _ = make_agent(
        settings,
        [
            [ToolCall("echo", {"text": "hilo"})],
            tell_last_result,
            [ToolCall("echo", {"text": "aquí"})],
            tell_last_result,
            [ToolCall("echo", {"text": "hilo otra vez"})],
            tell_last_result,
        ],
    )
    closing(agent)
    conversation = Conversation()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="agent-loop", daemon=True)
    thread.start()
    manager = None
    try:

        def on_thread(text: str) -> list[Event]:
            coro = turn(agent, conversation, text)
            return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=60)

        first = await asyncio.to_thread(on_thread, "en el hilo")
        here = await turn(agent, conversation, "en este bucle")
        again = await asyncio.to_thread(on_thread, "otra vez en el hilo")

        assert [r.result["data"]["result"] for r in tool_results(first + here + again)] == [
            "eco: hilo",
            "eco: aquí",
            "eco: hilo otra vez",
        ]
        manager = manager_for(agent.tools)
        assert manager.status()[0]["connections"] == 2  # one per loop, reused on the thread
    finally:
        if manager is not None:
            asyncio.run_coroutine_threadsafe(manager.aclose(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


async def test_older_sse_transport(write_config, make_agent, closing):
    server = HttpServerProcess("fake-sse", transport="sse").start()
    try:
        settings = write_config(
            [{"name": "fake-sse", "url": server.url, "transport": "sse", "timeout": 10}]
        )
        agent, _ = make_agent(settings, [[ToolCall("echo", {"text": "sse"})], ["ok"]])
        closing(agent)
        (result,) = tool_results(await turn(agent, Conversation(), "sse"))
    finally:
        server.stop()
    assert result.success and result.result["data"] == {"result": "eco: sse"}


async def test_turns_inside_a_rest_server_run_on_uvicorns_loop(
    http_server, write_config, make_agent
):
    """The REST server drives the agent from request handlers on uvicorn's (uv)loop."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    settings = write_config([{"name": "fake-http", "url": http_server.url, "timeout": 10}])
    agent, _ = make_agent(
        settings,
        [
            [ToolCall("echo", {"text": "uno"})],
            tell_last_result,
            [ToolCall("echo", {"text": "dos"})],
            tell_last_result,
        ],
    )
    conversation = Conversation()

    async def chat(request: Request) -> JSONResponse:
        events = await turn(agent, conversation, (await request.json())["content"])
        return JSONResponse(
            {
                "results": [r.result for r in tool_results(events)],
                "connections": manager_for(agent.tools).status()[0]["connections"],
            }
        )

    app = Starlette(routes=[Route("/chat/", chat, methods=["POST"])])
    with serve_asgi(app) as base:
        async with httpx.AsyncClient(timeout=60) as http:
            first = (await http.post(f"{base}/chat/", json={"content": "uno"})).json()
            second = (await http.post(f"{base}/chat/", json={"content": "dos"})).json()

    assert first["results"][0]["data"] == {"result": "eco: uno"}
    assert second["results"][0]["data"] == {"result": "eco: dos"}
    assert second["connections"] == 1  # the session opened on uvicorn's loop is reused


# ---------------------------------------------------------------------------------------------
# failures


async def test_stop_during_an_mcp_call_cancels_it_and_the_next_turn_works(
    http_server, write_config, make_agent, closing
):
    settings = write_config([{"name": "fake-http", "url": http_server.url, "timeout": 30}])
    agent, _ = make_agent(
        settings,
        [[ToolCall("slow", {"seconds": 60})], [ToolCall("echo", {"text": "sigo"})], ["ok"]],
    )
    closing(agent)
    conversation = Conversation()
    calling = asyncio.Event()

    async def consume() -> None:
        async for event in agent.stream(conversation, "espera mucho"):
            if isinstance(event, ToolCallEvent):
                calling.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(calling.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    (result,) = tool_results(await turn(agent, conversation, "¿sigues?"))
    assert result.success and result.result["data"] == {"result": "eco: sigo"}
    cancelled = [m for m in conversation.messages if isinstance(m, ToolResultMessage)][0]
    assert cancelled.name == "slow" and cancelled.success is False


async def test_server_down_at_start_is_reported_once_and_skipped(
    http_server, write_config, make_agent, closing, caplog
):
    down_url = f"http://127.0.0.1:{free_port()}/mcp"
    settings = write_config(
        [
            {"name": "apagado", "url": down_url, "timeout": 5},
            {"name": "fake-http", "url": http_server.url, "timeout": 10},
        ]
    )
    agent, _ = make_agent(
        settings,
        [
            [ToolCall("echo", {"text": "a"})],
            tell_last_result,
            [ToolCall("echo", {"text": "b"})],
            tell_last_result,
        ],
    )
    closing(agent)
    conversation = Conversation()

    first = await turn(agent, conversation, "uno")
    second = await turn(agent, conversation, "dos")

    assert [r.success for r in tool_results(first + second)] == [True, True]
    reports = [r for r in caplog.records if "apagado" in r.getMessage()]
    assert len(reports) == 1
    assert reports[0].levelno == logging.WARNING
    assert down_url in reports[0].getMessage()
    assert manager_for(agent.tools).server("apagado").status == "down"


async def test_stdio_server_that_cannot_start_is_reported_and_skipped(
    write_config, make_agent, closing, caplog
):
    settings = write_config([{"name": "roto", "command": "/no/existe/servidor-mcp", "timeout": 5}])
    agent, _ = make_agent(settings, [["sin herramientas externas"]])
    closing(agent)

    events = await turn(agent, Conversation(), "hola")

    assert answer(events) == "sin herramientas externas"
    (report,) = [r.getMessage() for r in caplog.records if "roto" in r.getMessage()]
    assert "/no/existe/servidor-mcp" in report
    assert manager_for(agent.tools).server("roto").status == "down"


async def test_server_that_was_down_joins_on_a_later_turn(write_config, make_agent, closing):
    port = free_port()
    settings = write_config([{"name": "tarde", "url": f"http://127.0.0.1:{port}/mcp"}])
    agent, _ = make_agent(
        settings, [["aún no"], [ToolCall("echo", {"text": "ya"})], tell_last_result]
    )
    closing(agent)
    conversation = Conversation()

    await turn(agent, conversation, "uno")
    assert "echo" not in agent.tools.specs

    late = HttpServerProcess("tarde", port=port).start()
    try:
        manager_for(agent.tools).retry_interval = 0
        events = await turn(agent, conversation, "dos")
    finally:
        late.stop()
    (result,) = tool_results(events)
    assert result.success and result.result["data"] == {"result": "eco: ya"}


async def test_http_server_dying_mid_call_gives_a_tool_error_and_reconnects_next_turn(
    own_http_server, write_config, make_agent, closing
):
    settings = write_config([{"name": "fake-http", "url": own_http_server.url, "timeout": 10}])
    agent, model = make_agent(
        settings,
        [
            [ToolCall("crash", {})],
            tell_last_result,
            [ToolCall("echo", {"text": "de vuelta"})],
            tell_last_result,
        ],
    )
    closing(agent)
    conversation = Conversation()

    events = await turn(agent, conversation, "rompe el servidor")

    (crashed,) = tool_results(events)
    assert crashed.success is False
    assert "Se perdió la conexión con el servidor MCP 'fake-http'" in crashed.result["error"]
    assert "Se perdió la conexión" in answer(events)  # the model read the error and went on
    assert isinstance(events[-1], DoneEvent)
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    assert len(model.requests) == 2
    assert own_http_server.proc.wait(timeout=10) == 3

    restarted = HttpServerProcess("fake-http", port=own_http_server.port).start()
    try:
        events = await turn(agent, conversation, "¿sigue ahí?")
    finally:
        restarted.stop()
    (echoed,) = tool_results(events)
    assert echoed.success and echoed.result["data"] == {"result": "eco: de vuelta"}


async def test_http_server_killed_between_turns_gives_a_tool_error_not_a_crash(
    own_http_server, write_config, make_agent, closing
):
    settings = write_config([{"name": "fake-http", "url": own_http_server.url, "timeout": 10}])
    agent, _ = make_agent(
        settings,
        [
            [ToolCall("echo", {"text": "antes"})],
            tell_last_result,
            [ToolCall("echo", {"text": "después"})],
            tell_last_result,
        ],
    )
    closing(agent)
    conversation = Conversation()
    before = await turn(agent, conversation, "uno")
    assert tool_results(before)[0].success

    own_http_server.stop()  # SIGKILL, as an operator or the OOM killer would
    events = await turn(agent, conversation, "dos")

    (result,) = tool_results(events)
    assert result.success is False
    assert "fake-http" in result.result["error"]
    assert "Se perdió la conexión" in answer(events) or "no está disponible" in answer(events)
    assert isinstance(events[-1], DoneEvent)


async def test_stdio_server_dying_mid_call_gives_a_tool_error_and_restarts_next_turn(
    write_config, make_agent, closing
):
    settings = write_config([{**stdio_params("fake-stdio"), "timeout": 30}])
    agent, _ = make_agent(
        settings,
        [
            [ToolCall("crash", {})],
            tell_last_result,
            [ToolCall("echo", {"text": "nuevo proceso"})],
            tell_last_result,
        ],
    )
    closing(agent)
    conversation = Conversation()

    first = await turn(agent, conversation, "rompe")
    second = await turn(agent, conversation, "otra vez")

    (crashed,) = tool_results(first)
    assert crashed.success is False and "fake-stdio" in crashed.result["error"]
    (echoed,) = tool_results(second)
    assert echoed.success and echoed.result["data"] == {"result": "eco: nuevo proceso"}


async def test_slow_tool_hits_the_server_timeout_and_the_connection_survives(
    http_server, write_config, make_agent, closing
):
    settings = write_config([{"name": "fake-http", "url": http_server.url, "timeout": 2}])
    agent, _ = make_agent(
        settings,
        [[ToolCall("slow", {"seconds": 60})], [ToolCall("echo", {"text": "rápido"})], ["fin"]],
    )
    closing(agent)

    slow, quick = tool_results(await turn(agent, Conversation(), "espera"))

    assert slow.success is False
    assert "timeout" in slow.result["error"] and "2 s" in slow.result["error"]
    assert slow.result["timeout"] == 2
    assert quick.success and quick.result["data"] == {"result": "eco: rápido"}


# ---------------------------------------------------------------------------------------------
# the seed's plain JSON-RPC servers (CONTRACT.md section 11)


async def test_seed_style_server_is_used_through_plain_json_rpc(
    seed_server, write_config, make_agent, closing
):
    settings = write_config([{"name": "seed", "url": seed_server.url + "/", "timeout": 5}])
    agent, _ = make_agent(
        settings,
        [[ToolCall("seedEcho", {"text": "hola"}), ToolCall("seedFail", {})], ["vale"]],
    )
    closing(agent)

    echoed, failed = tool_results(await turn(agent, Conversation(), "usa el seed"))

    assert echoed.success and echoed.result["text"] == "seed: hola"
    assert failed.success is False and "la herramienta falló" in failed.result["error"]
    assert agent.tools.specs["seedFail"].parameters == {"type": "object", "properties": {}}
    assert manager_for(agent.tools).server("seed").mode == "jsonrpc"
    assert seed_server.methods[-2:] == ["tools/call", "tools/call"]


async def test_explicit_jsonrpc_transport_skips_the_handshake(
    seed_server, write_config, make_agent, closing
):
    settings = write_config(
        [{"name": "seed", "url": seed_server.url, "timeout": 5, "transport": "jsonrpc"}]
    )
    agent, _ = make_agent(settings, [[ToolCall("seedEcho", {"text": "x"})], ["ok"]])
    closing(agent)

    (echoed,) = tool_results(await turn(agent, Conversation(), "seed"))

    assert echoed.success
    assert seed_server.methods == ["tools/list", "tools/call"]


async def test_agent_without_mcp_configuration_is_unchanged(make_agent, closing):
    agent, _ = make_agent(Settings(mcp_servers_path=None), [["hola"]])
    closing(agent)
    events = await turn(agent, Conversation(), "hola")
    assert answer(events) == "hola"
    assert manager_for(agent.tools) is None
    assert not [s for s in agent.tools.tool_list() if s.origin.startswith("mcp:")]
