"""Offline planner: accuracy on the phrasing sets and the cost of one planning call.

Accuracy: tests/planner/data/phrasings.yaml (the tuning set) and heldout.yaml (not tuned on).
Speed: one ``stream()`` call of the planner on a fresh request versus the ScriptedProvider on
the same request (a provider that does no work: the floor any provider pays in the agent loop),
and a mid-turn call that replays earlier tool results. Run: ``python benchmarks/bench_planner.py``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from idee_notebook_agent.core.conversation import (
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from idee_notebook_agent.llm.base import ChatRequest
from idee_notebook_agent.llm.offline import OfflinePlanner
from idee_notebook_agent.llm.scripted import ScriptedProvider
from tests.fakes.planner_world import all_specs
from tests.planner.cases import accuracy, evaluate, load_cases

REPEAT = 300


async def consume(provider, request: ChatRequest) -> None:
    async for _chunk in provider.stream(request):
        pass


async def timed(provider, request: ChatRequest, repeat: int = REPEAT, fresh: bool = False) -> float:
    """Median seconds per call; ``fresh`` forgets parsed messages first (a new user message)."""
    samples = []
    for _ in range(repeat):
        if fresh:
            provider.data()._derived.pop("parse", None)
        start = time.perf_counter()
        await consume(provider, request)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def measure_accuracy(planner: OfflinePlanner) -> None:
    for name in ("phrasings.yaml", "heldout.yaml"):
        outcomes = evaluate(load_cases(name), planner)
        ok = sum(o.ok for o in outcomes)
        print(f"accuracy {name:<16} {accuracy(outcomes):6.1%}  ({ok}/{len(outcomes)})")


async def measure_speed(planner: OfflinePlanner) -> None:
    specs = all_specs()
    text = "Llévame a Madrid, acércate un poco y pon el catastro"
    fresh = ChatRequest(system="", messages=[UserMessage(text)], tools=specs)
    geocode = ToolCall("geocodePlace", {"q": "Madrid"})
    best = {"type": "municipio", "name": "Madrid", "lat": 40.4, "lon": -3.7}
    mid = ChatRequest(
        system="",
        messages=[
            UserMessage(text),
            AssistantMessage("", [geocode]),
            ToolResultMessage(geocode.id, geocode.name, {"success": True, "best": best}),
        ],
        tools=specs,
    )
    scripted = ScriptedProvider(default="ok")
    await consume(planner, fresh)  # load the rules once, as a long-lived server would
    base = await timed(scripted, fresh)
    first = await timed(planner, fresh, fresh=True)
    later = await timed(planner, mid)
    print(f"scripted provider (baseline)        {base * 1e3:8.3f} ms per call")
    print(
        f"planner, new message (3 clauses)    {first * 1e3:8.3f} ms per call  ({first / base:,.0f}x)"
    )
    print(
        f"planner, next round (parse cached)  {later * 1e3:8.3f} ms per call  ({later / base:,.0f}x)"
    )


if __name__ == "__main__":
    offline = OfflinePlanner()
    measure_accuracy(offline)
    asyncio.run(measure_speed(offline))
