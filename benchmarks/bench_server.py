"""REST/SSE server figures (issue 5), measured against one uvicorn process on 127.0.0.1.

1. Concurrent streaming turns: a fake model streams 50 tokens over 2 s; how many turns started at
   once all finish within 2.5 s (target ≥ 200). Baseline: a bare Starlette SSE route in the same
   process streaming the same 50 tokens over 2 s (no agent, no database).
2. Token → SSE latency: from the token leaving the model to its bytes being handed to the server
   (ASGI ``send``), p50/p95/p99 (target p95 ≤ 5 ms), alone and under load; same baseline.
3. Chat turns per second with a zero-latency model (JSON replies), against a bare JSON route.

The server runs in a child process (``--serve``); the load comes from raw asyncio sockets here
(on uvloop when installed, as the server's uvicorn uses it: the client then takes less of the
CPU the server shares with it), so the client does not steal the server's interpreter. Both
routes get a short warm-up first (first-use imports and caches are not counted). The server's CPU
time per turn is printed too: unlike wall-clock figures it does not depend on what else the
machine is running, and ``window / CPU per turn`` bounds how many turns one dedicated core could
serve in the window.
Run: ``python benchmarks/bench_server.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TOKENS = 50
STREAM_SECONDS = 2.0
WINDOW = 2.5
HOST = "127.0.0.1"
TOKEN_RE = re.compile(rb"k\d+x")


# ====================================================================== server side (child)
def serve(port: int, db: Path) -> None:
    import uvicorn
    from starlette.requests import Request
    from starlette.responses import JSONResponse, StreamingResponse

    from idee_notebook_agent.config import Settings
    from idee_notebook_agent.core.agent import Agent
    from idee_notebook_agent.llm.base import ChatRequest, TextChunk
    from idee_notebook_agent.llm.registry import ProviderRegistry
    from idee_notebook_agent.server.app import create_app
    from idee_notebook_agent.toolbox.registry import ToolRegistry

    made: dict[bytes, float] = {}
    sent: dict[bytes, float] = {}
    mode = {"delay": STREAM_SECONDS / TOKENS, "tokens": TOKENS}
    counter = itertools.count()

    class TimedProvider:
        """Streams unique tokens and notes when each one leaves the model."""

        name = "bench"
        default_model = "bench-model"

        async def stream(self, request: ChatRequest):
            for _ in range(mode["tokens"]):
                if mode["delay"]:
                    await asyncio.sleep(mode["delay"])
                token = f"k{next(counter)}x "
                made[token.strip().encode()] = time.perf_counter()
                yield TextChunk(token)

        async def list_models(self) -> list[str]:
            return [self.default_model]

        async def aclose(self) -> None:
            return None

    settings = Settings(
        _env_file=None,
        database_url=f"sqlite:///{db}",
        llm_provider="bench",
        conversation_max_per_client=0,
        data_dir=db.parent,
    )
    tools = ToolRegistry.load(settings, include_builtin_executors=False)
    providers = ProviderRegistry([], settings, default="bench")
    providers.register_instance("bench", TimedProvider())
    agent = Agent(settings, tools=tools, providers=providers, retriever=_NoKnowledge())
    app = create_app(settings, agent)

    async def bare_sse(request: Request) -> StreamingResponse:
        async def gen():
            for _ in range(mode["tokens"]):
                if mode["delay"]:
                    await asyncio.sleep(mode["delay"])
                token = f"k{next(counter)}x "
                made[token.strip().encode()] = time.perf_counter()
                data = json.dumps({"type": "text_delta", "text": token})
                yield f"event: text_delta\ndata: {data}\n\n"
            yield 'event: done\ndata: {"type": "done"}\n\n'

        return StreamingResponse(gen(), headers={"content-type": "text/event-stream"})

    async def bare_json(request: Request) -> JSONResponse:
        await request.body()
        return JSONResponse({"role": "assistant", "content": "ok", "type": "text"}, 201)

    async def control(request: Request) -> JSONResponse:
        body = await request.json()
        if body.get("reset"):
            made.clear()
            sent.clear()
        if "delay" in body:
            mode["delay"] = float(body["delay"])
        lat = [sent[t] - made[t] for t in sent if t in made]
        return JSONResponse({"latencies": lat if body.get("stats") else []})

    app.add_route("/bench/bare-sse/", bare_sse, methods=["POST"])
    app.add_route("/bench/bare-json/", bare_json, methods=["POST"])
    app.add_route("/bench/control/", control, methods=["POST"])

    async def timed(scope: Any, receive: Any, send: Any) -> None:
        async def send_timed(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                now = time.perf_counter()
                for token in TOKEN_RE.findall(message.get("body", b"")):
                    sent.setdefault(token, now)
            await send(message)

        await app(scope, receive, send_timed)

    uvicorn.run(timed, host=HOST, port=port, log_level="warning", access_log=False, backlog=4096)


class _NoKnowledge:
    async def retrieve(self, query: str, k: int) -> list[dict[str, Any]]:
        return []


# ====================================================================== client side
async def post(port: int, path: str, payload: dict[str, Any]) -> tuple[int, bytes, float]:
    """One HTTP/1.1 request on its own connection; returns (status, body, time of last byte)."""
    body = json.dumps(payload).encode()
    reader, writer = await asyncio.open_connection(HOST, port)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    writer.write(head + body)
    await writer.drain()
    data = await reader.read()
    end = time.perf_counter()
    writer.close()
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, data, end


async def create_conversations(port: int, n: int) -> list[str]:
    sem = asyncio.Semaphore(32)

    async def one() -> str:
        async with sem:
            _status, data, _ = await post(port, "/api/conversations/", {})
            return json.loads(data.split(b"\r\n\r\n", 1)[1])["id"]

    return await asyncio.gather(*(one() for _ in range(n)))


async def concurrent_streams(port: int, n: int, bare: bool) -> list[float]:
    """Start ``n`` streaming turns at once; durations of those that completed correctly."""
    ids = [] if bare else await create_conversations(port, n)
    start = time.perf_counter()

    async def one(i: int) -> float | None:
        if bare:
            status, data, end = await post(port, "/bench/bare-sse/", {})
        else:
            body = {"content": f"turno {i}", "stream": True}
            status, data, end = await post(port, f"/api/conversations/{ids[i]}/chat/", body)
        ok = status == 200 and data.count(b"event: text_delta") == TOKENS and b"event: done" in data
        return end - start if ok else None

    results = await asyncio.gather(*(one(i) for i in range(n)))
    return [r for r in results if r is not None]


async def control(port: int, **body: Any) -> dict[str, Any]:
    _s, data, _ = await post(port, "/bench/control/", body)
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


async def turns_per_second(port: int, seconds: float, clients: int, bare: bool) -> float:
    ids = [] if bare else await create_conversations(port, clients)
    done = 0
    stop = time.perf_counter() + seconds

    async def worker(i: int) -> None:
        nonlocal done
        while time.perf_counter() < stop:
            if bare:
                status, _d, _e = await post(port, "/bench/bare-json/", {"content": "hola"})
            else:
                status, _d, _e = await post(
                    port, f"/api/conversations/{ids[i]}/chat/", {"content": "hola"}
                )
            if status == 201:
                done += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(clients)))
    return done / (time.perf_counter() - start)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


async def wait_ready(port: int, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(300):
        if proc.poll() is not None:
            raise SystemExit("the server process exited")
        try:
            await control(port)
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise SystemExit("the server did not start")


def cpu_seconds(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


async def measured(pid: int, coro: Any) -> tuple[Any, float]:
    before = cpu_seconds(pid)
    result = await coro
    return result, cpu_seconds(pid) - before


async def run(port: int, pid: int, levels: list[int]) -> None:
    load = os.getloadavg()[0]
    print(
        f"Fake model: {TOKENS} tokens over {STREAM_SECONDS:.1f} s; window {WINDOW} s; one server process"
    )
    print(
        f"Machine: {os.cpu_count()} CPUs, load average {load:.1f} at start (other processes share them)"
    )
    loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
    print(f"Load generator: this process ({loop} event loop); server: a child process (uvicorn)")
    print("\n1) Concurrent streaming turns finished within the window")
    print(
        f"{'turns':>6} {'bare ok':>8} {'bare max':>9} {'ours ok':>8} {'ours p50':>9} {'ours max':>9} "
        f"{'CPU/turn bare':>14} {'CPU/turn ours':>14}"
    )
    # warm-up, not counted: first-use costs (imports, compiled statements, caches) of both routes
    await control(port, reset=True, delay=STREAM_SECONDS / TOKENS)
    await concurrent_streams(port, 10, bare=True)
    await concurrent_streams(port, 10, bare=False)
    best = 0
    cpu_per_turn: list[float] = []
    for n in levels:
        await control(port, reset=True, delay=STREAM_SECONDS / TOKENS)
        bare, bare_cpu = await measured(pid, concurrent_streams(port, n, bare=True))
        ours, ours_cpu = await measured(pid, concurrent_streams(port, n, bare=False))
        ours_in = [d for d in ours if d <= WINDOW]
        bare_in = [d for d in bare if d <= WINDOW]
        cpu_per_turn.append(ours_cpu / n)
        print(
            f"{n:>6} {len(bare_in):>8} {max(bare or [0]):>8.2f}s {len(ours_in):>8} "
            f"{statistics.median(ours or [0]):>8.2f}s {max(ours or [0]):>8.2f}s "
            f"{bare_cpu / n * 1000:>11.2f} ms {ours_cpu / n * 1000:>11.2f} ms"
        )
        if len(ours_in) == n:
            best = n
    per_turn = statistics.median(cpu_per_turn)
    print(
        f"→ measured here: every turn inside {WINDOW} s up to {best} concurrent turns (target ≥ 200)"
    )
    print(
        f"→ server CPU per streaming turn (incl. creating it): {per_turn * 1000:.2f} ms ⇒ one dedicated "
        f"core fits ≈ {int(WINDOW / per_turn)} turns in {WINDOW} s"
    )

    print("\n2) Token → SSE event latency (model yields the token → its bytes reach ASGI send)")
    print(f"{'load':>6} {'route':>6} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'tokens':>7}")
    for n in (1, 100, 200):
        for label, bare in (("bare", True), ("ours", False)):
            await control(port, reset=True, delay=STREAM_SECONDS / TOKENS)
            await concurrent_streams(port, n, bare=bare)
            lat = [v * 1000 for v in (await control(port, stats=True))["latencies"]]
            print(
                f"{n:>6} {label:>6} {pct(lat, 0.5):>8.3f} {pct(lat, 0.95):>8.3f} "
                f"{pct(lat, 0.99):>8.3f} {len(lat):>7}"
            )

    print("\n3) Chat turns per second, zero-latency model (JSON reply, saved in SQLite)")
    await control(port, reset=True, delay=0)
    for clients in (1, 8):
        bare = await turns_per_second(port, 3.0, clients, bare=True)
        ours, cpu = await measured(pid, turns_per_second(port, 3.0, clients, bare=False))
        print(
            f"  {clients} client(s): {ours:7.1f} turns/s   bare JSON route {bare:7.1f} req/s   "
            f"ratio {ours / bare:5.2f}   server CPU {cpu / (ours * 3.0) * 1000:.2f} ms/turn"
        )


def _run_client(coro: Any) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--levels", default="50,100,200,300,400", help="turns started at once")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.db)
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="idee-bench-server-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(port), "--db", str(Path(tmp) / "db.sqlite3")],
            env=env,
        )
        try:
            levels = [int(x) for x in args.levels.split(",") if x.strip()]

            async def go() -> None:
                await wait_ready(port, proc)
                await run(port, proc.pid, levels)

            _run_client(go())
        finally:
            proc.terminate()
            proc.wait(timeout=20)


if __name__ == "__main__":
    main()
