"""In a real ipykernel (the installed 7.x): the kernel answers cells while a turn streams, and a
Stop sent over the widget's comm cancels the turn cleanly."""

from __future__ import annotations

import os
import queue
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

pytestmark = pytest.mark.slow

SETUP = """
from idee_notebook_agent.core.agent import Agent
from idee_notebook_agent.llm.scripted import ScriptedProvider
from idee_notebook_agent.notebook.mapchat import MapChat
agent = Agent(provider="scripted")
agent.retriever = None
slow = ScriptedProvider([[" ".join(f"w{i}" for i in range(100))]], delay=0.05)  # about 5 s
agent.providers.register_instance("scripted", slow)
mc = MapChat(agent=agent, provider="scripted")
print("COMM", mc.chat.comm.comm_id)
"""


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    env = {
        **os.environ,
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "IDEE_BASEMAP_URL": "http://127.0.0.1:9/{z}/{x}/{y}.png",
        "IDEE_DATA_DIR": str(tmp_path / "data"),
        "IDEE_CACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    for name in ("OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY", "MCP_SERVERS_PATH"):
        env.pop(name, None)
    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=60, env=env, cwd=str(tmp_path))
    try:
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def run(kc: Any, code: str, timeout: float = 60) -> str:
    """Execute ``code`` and return its stdout (raises on an error reply)."""
    collect = _Collector()
    reply = kc.execute_interactive(code, timeout=timeout, output_hook=collect)
    assert reply["content"]["status"] == "ok", collect.text
    return collect.text


class _Collector:
    def __init__(self) -> None:
        self.text = ""

    def __call__(self, msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "stream":
            self.text += msg["content"]["text"]
        elif msg["msg_type"] == "error":
            self.text += "\n".join(msg["content"]["traceback"])


def send_custom(kc: Any, comm_id: str, content: dict[str, Any]) -> None:
    """What the browser's widget manager sends for ``model.send(content)``."""
    msg = kc.session.msg(
        "comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": content}}
    )
    kc.shell_channel.send(msg)


def iopub_until(kc: Any, stop: Any, timeout: float = 30) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=0.5)
        except queue.Empty:
            continue
        seen.append(msg)
        if stop(msg, seen):
            return seen
    raise AssertionError(f"timeout; last messages: {[m['msg_type'] for m in seen[-10:]]}")


def chat_event(msg: dict[str, Any], comm_id: str) -> dict[str, Any] | None:
    if msg["msg_type"] != "comm_msg" or msg["content"].get("comm_id") != comm_id:
        return None
    data = msg["content"].get("data", {})
    return data.get("content") if data.get("method") == "custom" else None


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX kernel test")
def test_kernel_answers_cells_while_a_turn_streams_and_stop_cancels(kernel) -> None:
    _km, kc = kernel
    out = run(kc, SETUP)
    comm_id = out.split("COMM", 1)[1].split()[0]
    while True:  # drop what setup published
        try:
            kc.get_iopub_msg(timeout=0.2)
        except queue.Empty:
            break

    send_custom(kc, comm_id, {"type": "user_message", "text": "cuéntame algo largo"})
    iopub_until(kc, lambda m, s: (chat_event(m, comm_id) or {}).get("type") == "text_delta")
    msg_id = kc.execute("40 + 2")
    seen = iopub_until(
        kc,
        lambda m, s: (
            m["msg_type"] == "execute_result" and m["parent_header"].get("msg_id") == msg_id
        ),
    )
    events = [e for e in (chat_event(m, comm_id) for m in seen) if e]
    assert not any(e["type"] == "turn_end" for e in events)  # answered while the turn streams
    assert seen[-1]["content"]["data"]["text/plain"] == "42"

    send_custom(kc, comm_id, {"type": "stop"})
    seen = iopub_until(kc, lambda m, s: (chat_event(m, comm_id) or {}).get("type") == "turn_end")
    assert chat_event(seen[-1], comm_id)["stopped"] is True

    report = run(
        kc,
        "import threading\n"
        "print(slow.closed_streams, mc.chat.status, mc.chat.runner.pending_tasks(),"
        " sorted(t.name for t in threading.enumerate() if t.name.startswith('idee')),"
        " repr(mc.conversation.messages[-1].text[:6]))",
    )
    closed, status, pending, threads, partial = report.strip().split(" ", 4)
    assert (closed, status, pending) == ("1", "idle", "0")
    assert threads == "['idee-agent-runner']"
    assert partial.startswith("'w0")  # what was said is kept
