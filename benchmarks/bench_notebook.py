"""Notebook front end figures (issue 4).

1. Chat message → map trait update, kernel side: from the widget's comm handler receiving
   ``{type: "user_message"}`` to ``Map.center`` changing for a ``zoomTo`` answered by a scripted
   model at zero latency (µs, p50/p95). Measured in a real ipykernel (the installed 7.x, real comm
   and ZMQ) and in-process. Baseline in the same run: ``LeafletMapPort.call("zoomTo")`` on the
   same map from the same thread (the cost of the map itself), so the ratio is the agent + runner
   overhead.
2. Kernel responsiveness: ``execute_request`` round trips (``40 + 2``) while a 5 s turn streams
   over the widget's comm, against the same round trips with the kernel idle (ms, p50/max); and
   whether every reply arrived before the turn ended.

Run: ``python benchmarks/bench_notebook.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MEASURE = r"""
import statistics, threading, time
from idee_notebook_agent.config import Settings
from idee_notebook_agent.core.agent import Agent
from idee_notebook_agent.llm.scripted import ScriptedProvider
from idee_notebook_agent.notebook.mapchat import MapChat

def _measure(rounds):
    agent = Agent(Settings(_env_file=None), provider="scripted")
    agent.retriever = None
    provider = ScriptedProvider()
    agent.providers.register_instance("scripted", provider)
    mc = MapChat(agent=agent, provider="scripted", basemap_url="http://127.0.0.1:9/{z}/{x}/{y}.png")
    moved = threading.Event()
    stamp = {}
    def on_center(change):
        stamp["t1"] = time.perf_counter_ns()
        moved.set()
    mc.map.observe(on_center, names="center")
    comm = mc.chat.comm
    turn_us, direct_us = [], []
    for i in range(rounds):
        lat = 36.0 + (i % 80) * 0.1
        provider.queue([{"name": "zoomTo", "args": {"lat": lat, "lon": -3.7, "zoom": 10}}], ["ok"])
        if i % 20 == 0:
            mc.chat.new_conversation()
        moved.clear()
        msg = {"content": {"comm_id": comm.comm_id, "data": {"method": "custom",
               "content": {"type": "user_message", "text": "ve a %d" % i}}}, "buffers": []}
        t0 = time.perf_counter_ns()
        comm.handle_msg(msg)
        assert moved.wait(10)
        turn_us.append((stamp["t1"] - t0) / 1000)
        while mc.chat.running:
            time.sleep(0.0005)
        moved.clear()
        t0 = time.perf_counter_ns()
        mc.port.call("zoomTo", {"lat": lat + 0.05, "lon": -3.6, "zoom": 11})
        assert moved.is_set()
        direct_us.append((stamp["t1"] - t0) / 1000)
    mc.close()
    q = lambda xs, p: statistics.quantiles(xs, n=100)[p - 1]
    return {"turn_p50": statistics.median(turn_us), "turn_p95": q(turn_us, 95),
            "direct_p50": statistics.median(direct_us), "direct_p95": q(direct_us, 95)}
"""

SLOW_TURN = r"""
from idee_notebook_agent.config import Settings
from idee_notebook_agent.core.agent import Agent
from idee_notebook_agent.llm.scripted import ScriptedProvider
from idee_notebook_agent.notebook.mapchat import MapChat
_agent = Agent(Settings(_env_file=None), provider="scripted")
_agent.retriever = None
_agent.providers.register_instance(
    "scripted", ScriptedProvider([[" ".join(f"w{i}" for i in range(100))]], delay=0.05))
slow_chat = MapChat(agent=_agent, provider="scripted", basemap_url="http://127.0.0.1:9/{z}/{x}/{y}.png")
print("COMM", slow_chat.chat.comm.comm_id)
"""


def fmt(result: dict[str, float]) -> str:
    ratio = result["turn_p50"] / result["direct_p50"]
    return (
        f"chat message → map trait: p50 {result['turn_p50']:.0f} µs, p95 {result['turn_p95']:.0f} µs"
        f" | baseline port.call(zoomTo): p50 {result['direct_p50']:.0f} µs,"
        f" p95 {result['direct_p95']:.0f} µs | ratio {ratio:.1f}×"
    )


def in_process(rounds: int) -> dict[str, float]:
    namespace: dict[str, Any] = {}
    exec(MEASURE, namespace)
    return namespace["_measure"](rounds)


def run_code(kc: Any, code: str) -> str:
    out: list[str] = []

    def hook(msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out.append("\n".join(msg["content"]["traceback"]))

    reply = kc.execute_interactive(code, timeout=120, output_hook=hook)
    if reply["content"]["status"] != "ok":
        raise RuntimeError("".join(out))
    return "".join(out)


def drain(kc: Any) -> None:
    while True:
        try:
            kc.get_iopub_msg(timeout=0.2)
        except queue.Empty:
            return


def round_trip(kc: Any, turn_end: dict[str, Any], comm_id: str) -> float:
    """One ``40 + 2`` execute_request → execute_reply, in ms (iopub read for the turn's end)."""
    t0 = time.perf_counter()
    msg_id = kc.execute("40 + 2", store_history=False)
    while True:
        reply = kc.get_shell_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    elapsed = (time.perf_counter() - t0) * 1000
    while True:
        try:
            msg = kc.get_iopub_msg(timeout=0)
        except queue.Empty:
            break
        data = msg["content"].get("data", {}) if msg["msg_type"] == "comm_msg" else {}
        if msg["content"].get("comm_id") == comm_id and data.get("content", {}).get("type") == "turn_end":  # fmt: skip
            turn_end.setdefault("at", time.perf_counter())
    return elapsed


def in_kernel(rounds: int) -> tuple[dict[str, float], dict[str, Any]]:
    from jupyter_client.manager import start_new_kernel

    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env.update(IPYTHONDIR=str(Path(tmp) / "ipy"), PYTHONPATH=str(REPO))
        km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=tmp, startup_timeout=60)
        try:
            import ipykernel

            run_code(kc, MEASURE)
            text = run_code(kc, f"r = _measure({rounds}); print(repr(r))")
            trait = eval(text.strip())

            out = run_code(kc, SLOW_TURN)
            comm_id = out.split("COMM", 1)[1].split()[0]
            drain(kc)
            turn_end: dict[str, Any] = {}
            idle = [round_trip(kc, turn_end, comm_id) for _ in range(10)]
            msg = kc.session.msg(
                "comm_msg",
                {
                    "comm_id": comm_id,
                    "data": {
                        "method": "custom",
                        "content": {"type": "user_message", "text": "algo largo"},
                    },
                },
            )
            started = time.perf_counter()
            kc.shell_channel.send(msg)
            busy = []
            while time.perf_counter() - started < 4.5:
                busy.append(round_trip(kc, turn_end, comm_id))
                time.sleep(0.3)
            before_end = "at" not in turn_end
            responsive = {
                "ipykernel": ipykernel.__version__,
                "idle_p50": statistics.median(idle),
                "idle_max": max(idle),
                "busy_p50": statistics.median(busy),
                "busy_max": max(busy),
                "busy_n": len(busy),
                "all_before_turn_end": before_end,
            }
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    return trait, responsive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()

    print("== 1. chat message → map trait update (zoomTo, scripted model at zero latency)")
    trait, responsive = in_kernel(args.rounds)
    print(f"  in ipykernel {responsive['ipykernel']}: {fmt(trait)}")
    print(f"  in-process (no kernel):   {fmt(in_process(args.rounds))}")
    print("== 2. execute_request round trip while a 5 s turn streams over the widget comm")
    r = responsive
    print(
        f"  idle: p50 {r['idle_p50']:.1f} ms, max {r['idle_max']:.1f} ms (10)"
        f" | during the turn: p50 {r['busy_p50']:.1f} ms, max {r['busy_max']:.1f} ms"
        f" ({r['busy_n']}) | ratio p50 {r['busy_p50'] / r['idle_p50']:.1f}×"
        f" | all answered before the turn ended: {r['all_before_turn_end']}"
    )


if __name__ == "__main__":
    main()
