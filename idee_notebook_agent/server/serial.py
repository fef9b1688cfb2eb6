"""One thread that runs blocking calls in order and answers asyncio futures directly.

SQLite takes one writer at a time, so the server sends its store work to a single thread (see
``ConversationService.db``). Every turn makes several such calls, so two costs matter:

* the hand-off: ``run_in_executor`` on a one-worker ``ThreadPoolExecutor`` pays for a
  ``concurrent.futures.Future`` (with its condition variable), a work item and the chaining of two
  futures, about three times a queue put plus ``call_soon_threadsafe``;
* the commit: when many turns start or end together, their writes wait in the queue one behind
  the other, each with its own commit. Calls submitted with the same ``group`` runner that are
  waiting next to each other are handed to that runner together (at most ``MAX_GROUP``), which
  runs them in one transaction (``Store.run_units``).

Otherwise the semantics are the executor's: calls run in submission order, a call whose future was
cancelled before it started is skipped, exceptions reach the awaiting coroutine.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

MAX_GROUP = 64
"""Most calls run in one group: bounds how long one transaction holds SQLite's write lock."""

Group = Callable[[list[Any]], list[tuple[Any, BaseException | None]]]
"""Runs several payloads together; ``(result, error)`` for each, in order."""

EXIT_WAIT_SECONDS = 10.0
"""At interpreter exit, how long to let queued calls (e.g. the last saves) finish."""

_STOP = object()
_workers: weakref.WeakSet[SerialWorker] = weakref.WeakSet()


@atexit.register
def _drain_at_exit() -> None:
    """The thread is a daemon (a worker nobody shut down must not block exit), so give queued
    calls their chance to finish first, as ``ThreadPoolExecutor`` does for its own threads."""
    for worker in list(_workers):
        worker.shutdown()
        worker._thread.join(EXIT_WAIT_SECONDS)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class SerialWorker:
    """A daemon thread draining a queue of calls; ``submit`` from a running event loop."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        _workers.add(self)

    def submit(self, payload: Any, group: Group | None = None) -> asyncio.Future[Any]:
        """Run ``payload()`` (or, with ``group``, ``group([payload, ...])``) on the thread."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.put((loop, future, payload, group))
        return future

    def shutdown(self) -> None:
        """Stop once the calls already queued have run (does not wait for them)."""
        self._queue.put(_STOP)

    def _run(self) -> None:
        item: Any = None
        while True:
            if item is None:
                item = self._queue.get()
            if item is _STOP:
                return
            batch, item = self._take_group(item)
            live = [entry for entry in batch if not entry[1].cancelled()]
            if not live:  # their callers went away before the calls started
                continue
            group = live[0][3]
            try:
                if group is None:
                    try:
                        outcomes = [(live[0][2](), None)]
                    except BaseException as exc:  # handed to the caller, as an executor would
                        outcomes = [(None, exc)]
                else:
                    outcomes = group([entry[2] for entry in live])
            except BaseException as exc:
                outcomes = [(None, exc)] * len(live)
            if len(outcomes) != len(live):  # a faulty runner must not leave callers waiting
                outcomes = [(None, RuntimeError("group runner answered the wrong count"))] * len(
                    live
                )
            for (loop, future, _payload, _group), (result, error) in zip(
                live, outcomes, strict=True
            ):
                try:
                    loop.call_soon_threadsafe(_settle, future, result, error)
                except RuntimeError:  # the loop has closed: nobody is waiting any more
                    log.debug("Resultado descartado: el bucle de eventos ya se cerró")

    def _take_group(self, first: Any) -> tuple[list[Any], Any]:
        """``first`` and the queued calls of the same group right behind it; the next item."""
        group = first[3]
        batch = [first]
        if group is None:
            return batch, None
        while len(batch) < MAX_GROUP:
            try:
                following = self._queue.get_nowait()
            except queue.Empty:
                return batch, None
            if following is _STOP or following[3] != group:
                return batch, following
            batch.append(following)
        return batch, None


__all__ = ["MAX_GROUP", "SerialWorker"]
