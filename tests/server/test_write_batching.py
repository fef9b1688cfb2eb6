"""The streaming path's shortcuts keep the contract: SSE bytes, grouped store writes, order."""

from __future__ import annotations

import asyncio
import json
import threading
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError

from idee_notebook_agent.server.serial import SerialWorker
from idee_notebook_agent.server.sse import frame
from idee_notebook_agent.server.store import NewMessage, Store

TRICKY = ["hola ", "", "línea\nnueva", 'comillas " y \\ barra', "\u2028\u2029\x00\x1f", "😀 ñ €"]


@pytest.mark.parametrize("text", TRICKY)
def test_text_delta_frame_is_byte_for_byte_the_json_dumps_frame(text: str) -> None:
    event = {"type": "text_delta", "text": text}
    data = json.dumps(event, ensure_ascii=False, default=str)
    assert frame(event) == f"event: text_delta\ndata: {data}\n\n"
    assert frame(event).count("\n") == 3  # one data line whatever the text holds


def test_other_events_keep_their_key_order_and_fallback_encoding() -> None:
    odd = {"text": "x", "type": "text_delta"}
    assert frame(odd) == 'event: text_delta\ndata: {"text": "x", "type": "text_delta"}\n\n'
    event = {"type": "error", "message": "¡mal!\n", "code": "x", "extra": Path("/a")}
    expected = json.dumps(event, ensure_ascii=False, default=str)
    assert frame(event) == f"event: error\ndata: {expected}\n\n"


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = Store(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    yield s
    s.close()


def test_a_failing_unit_does_not_take_the_others_down(store: Store) -> None:
    for cid in ("a", "b"):
        store.create(cid, state="{}")
    row = NewMessage("m-1", "user", "hola")
    units = [
        partial(store.save_in, conversation_id="a", state='{"v": 1}', messages=[row]),
        partial(store.save_in, conversation_id="b", messages=[row]),  # duplicate message id
        partial(store.save_in, conversation_id="b", state='{"v": 2}', turn="begin"),
        partial(store.save_in, conversation_id="gone", state="{}"),
        partial(store.load_in, conversation_id="a"),
    ]
    outcomes = store.run_units(units)
    assert [m.id for m in outcomes[0][0]] == ["m-1"] and outcomes[0][1] is None
    assert outcomes[1][0] is None and isinstance(outcomes[1][1], IntegrityError)
    assert outcomes[2] == ([], None)
    assert outcomes[3] == (None, None)  # unknown conversation: nothing saved, no error
    loaded = outcomes[4][0]
    assert loaded.state == '{"v": 1}' and loaded.record.message_count == 1
    assert store.load("b").state == '{"v": 2}' and store.get("b").busy
    assert [m.conversation_id for m in store.messages("a")] == ["a"]
    assert store.messages("b") == []


async def test_waiting_units_run_together_in_order_and_errors_reach_their_caller() -> None:
    worker = SerialWorker("test-db")
    batches: list[list[Any]] = []

    def group(payloads: list[Any]) -> list[tuple[Any, BaseException | None]]:
        batches.append(list(payloads))
        return [(None, ValueError(p)) if p == "bad" else (p * 2, None) for p in payloads]

    gate = threading.Event()
    try:
        blocker = worker.submit(gate.wait)  # holds the thread while the rest queue up
        futures = [worker.submit(p, group) for p in ("a", "b", "bad", "c")]
        skipped = worker.submit("never", group)
        skipped.cancel()
        after = worker.submit(lambda: "plain")
        last = worker.submit("d", group)
        gate.set()
        assert await blocker is True
        results = await asyncio.gather(*futures, return_exceptions=True)
        assert results[:2] == ["aa", "bb"] and results[3] == "cc"
        assert isinstance(results[2], ValueError)
        assert await after == "plain" and await last == "dd"
    finally:
        worker.shutdown()
    assert batches == [["a", "b", "bad", "c"], ["d"]]  # the cancelled one never ran
