"""Provider overhead: our OpenAI/Gemini providers versus the bare SDK on the same loopback fake.

Prints milliseconds per streamed reply (400 characters in 100 chunks, plus one tool call) and
the ratio to the bare SDK loop measured in the same run. Run: ``.venv/bin/python
benchmarks/bench_llm.py``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from idee_notebook_agent.core.conversation import UserMessage
from idee_notebook_agent.llm.base import ChatRequest
from idee_notebook_agent.llm.gemini_provider import GeminiProvider
from idee_notebook_agent.llm.openai_provider import OpenAIProvider
from tests.fakes.gemini_server import FakeFunctionCall, FakeGeminiServer, GeminiReply
from tests.fakes.openai_server import (
    FakeOpenAIServer,
    FakeToolCall,
    OpenAIReply,
)

ROUNDS = 30
TEXT = "palabra " * 50


async def _time(fn, rounds: int = ROUNDS) -> float:
    await fn()  # warm-up: imports, connection pool
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


async def bench_openai() -> tuple[float, float]:
    import openai

    fake = FakeOpenAIServer().start()
    reply = OpenAIReply(text=TEXT, tool_calls=[FakeToolCall("setZoom", {"level": 9})])
    client = openai.AsyncOpenAI(api_key="sk", base_url=fake.url, max_retries=0)
    provider = OpenAIProvider(api_key="sk", base_url=fake.url, max_retries=0)
    request = ChatRequest(system="s", messages=[UserMessage("x")], model="gpt-4o-mini")

    async def bare() -> None:
        fake.queue(reply)
        stream = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "x"}], stream=True
        )
        async for _ in stream:
            pass

    async def ours() -> None:
        fake.queue(reply)
        async for _ in provider.stream(request):
            pass

    try:
        return await _time(bare), await _time(ours)
    finally:
        await client.close()
        await provider.aclose()
        fake.stop()


async def bench_gemini() -> tuple[float, float]:
    from google import genai
    from google.genai import types

    fake = FakeGeminiServer().start()
    reply = GeminiReply(text=TEXT, function_calls=[FakeFunctionCall("setZoom", {"level": 9})])
    client = genai.Client(
        api_key="k", http_options=types.HttpOptions(base_url=fake.url, api_version="v1beta")
    )
    provider = GeminiProvider(api_key="k", base_url=fake.url, max_retries=0)
    request = ChatRequest(system="s", messages=[UserMessage("x")], model="gemini-2.5-flash")

    async def bare() -> None:
        fake.queue(reply)
        stream = await client.aio.models.generate_content_stream(
            model="gemini-2.5-flash", contents="x"
        )
        async for _ in stream:
            pass

    async def ours() -> None:
        fake.queue(reply)
        async for _ in provider.stream(request):
            pass

    try:
        return await _time(bare), await _time(ours)
    finally:
        await client.aio.aclose()
        await provider.aclose()
        fake.stop()


async def main() -> None:
    print(f"streamed reply: {len(TEXT)} chars in ~{len(TEXT) // 4} chunks + 1 tool call")
    for name, bench in (("openai", bench_openai), ("gemini", bench_gemini)):
        bare, ours = await bench()
        print(
            f"{name:7s} bare SDK {bare:7.2f} ms/reply | provider {ours:7.2f} ms/reply | "
            f"overhead {ours - bare:+6.2f} ms | ratio {ours / bare:5.2f}x"
        )


if __name__ == "__main__":
    asyncio.run(main())
