"""A background thread that owns an asyncio loop, so agent turns never block the kernel.

ipykernel 7 does not run background tasks of its own loop between cells (ipykernel#1510) and a
comm handler that blocks keeps every widget message, Stop included, from arriving
(ipywidgets#1349). The chat's handlers therefore only *submit* work here and return at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class AgentRunner:
    """One daemon thread running one event loop; started on first use, stopped by ``stop()``."""

    def __init__(self, name: str = "idee-agent-runner") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ life cycle
    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The runner's loop (starting the thread if needed)."""
        self.start()
        assert self._loop is not None
        return self._loop

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def start(self) -> None:
        with self._lock:
            if self.alive:
                return
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def run() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                try:
                    loop.run_forever()
                finally:
                    _cancel_all(loop)
                    loop.run_until_complete(loop.shutdown_asyncgens())
                    loop.close()

            thread = threading.Thread(target=run, name=self.name, daemon=True)
            thread.start()
            ready.wait()
            self._loop, self._thread = loop, thread

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel what still runs, stop the loop and join the thread (idempotent)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None or not thread.is_alive():
            return
        if threading.current_thread() is thread:
            loop.call_soon(loop.stop)
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if thread.is_alive():
            log.warning("El hilo del agente no terminó en %.1f s", timeout)

    # ------------------------------------------------------------------ work
    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the runner loop; returns at once with a thread-safe future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the runner loop and wait for its result (not from the runner thread)."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("AgentRunner.run no puede llamarse desde su propio hilo.")
        return self.submit(coro).result(timeout)

    def call_soon(self, fn: Any, *args: Any) -> None:
        """Call ``fn(*args)`` on the runner thread."""
        self.loop.call_soon_threadsafe(fn, *args)

    def pending_tasks(self) -> int:
        """How many tasks are still alive on the loop (0 when idle: no orphan turns)."""
        loop = self._loop
        if loop is None or not self.alive:
            return 0

        async def count() -> int:
            current = asyncio.current_task()
            return sum(1 for t in asyncio.all_tasks() if t is not current and not t.done())

        return self.run(count(), timeout=5)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
