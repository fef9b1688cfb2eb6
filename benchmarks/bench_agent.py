"""Agent overhead per turn: the full loop versus calling the same zero-latency model in a bare loop.

A turn is: user message → model asks zoomTo → headless map runs it → model answers text.
The baseline drives the same ScriptedProvider and HeadlessMapPort by hand, with no registry,
validation, events or conversation bookkeeping. Target: ≤ 1 ms of overhead per turn.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from idee_notebook_agent.config import Settings
from idee_notebook_agent.core.agent import Agent
from idee_notebook_agent.core.conversation import Conversation, ToolCall
from idee_notebook_agent.core.headless_map import HeadlessMapPort
from idee_notebook_agent.llm.base import ChatRequest, TextChunk, ToolCallChunk
from idee_notebook_agent.llm.scripted import ScriptedProvider

TURNS = 2000


def script() -> list:
    return [
        [ToolCall("zoomTo", {"lat": 40.4, "lon": -3.7, "zoom": 12})],
        ["Hecho, ya estás en Madrid."],
    ]


async def bare_loop(provider: ScriptedProvider, port: HeadlessMapPort) -> float:
    start = time.perf_counter()
    for _ in range(TURNS):
        provider.queue(*script())
        for _round in range(2):
            calls = []
            async for chunk in provider.stream(ChatRequest(system="", messages=[])):
                if isinstance(chunk, ToolCallChunk):
                    calls.append(chunk.call)
                elif isinstance(chunk, TextChunk):
                    pass
            for call in calls:
                port.call(call.name, call.args)
    return (time.perf_counter() - start) / TURNS


async def agent_loop(agent: Agent, provider: ScriptedProvider, port: HeadlessMapPort) -> float:
    start = time.perf_counter()
    for _ in range(TURNS):
        provider.queue(*script())
        conversation = Conversation()
        async for _event in agent.stream(conversation, "Llévame a Madrid", map_port=port):
            pass
    return (time.perf_counter() - start) / TURNS


async def main() -> None:
    settings = Settings()
    provider = ScriptedProvider()
    agent = Agent(settings, retriever=None)
    agent.providers.register_instance("bench", provider)
    agent.provider = "bench"
    port = HeadlessMapPort()
    await agent_loop(agent, provider, port)  # warm-up
    bare, full = [], []
    for _ in range(3):
        bare.append(await bare_loop(provider, port))
        full.append(await agent_loop(agent, provider, port))
    b, f = statistics.median(bare), statistics.median(full)
    print(f"turns per run: {TURNS}, median of 3 runs")
    print(f"bare loop (model + map only): {b * 1e6:8.1f} µs/turn")
    print(f"agent loop:                   {f * 1e6:8.1f} µs/turn")
    print(
        f"agent overhead:               {(f - b) * 1e6:8.1f} µs/turn (target ≤ 1000 µs), ratio {f / b:.2f}×"
    )


if __name__ == "__main__":
    asyncio.run(main())
