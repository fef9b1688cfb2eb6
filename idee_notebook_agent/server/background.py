"""Run the server in a background thread (notebooks, tests, benchmarks): a real uvicorn on loopback.

    with BackgroundServer(create_app(agent=my_agent)) as server:
        httpx.get(server.url + "/api/providers/")

Port 0 picks a free port; ``url`` tells which one was chosen.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any


class BackgroundServer:
    def __init__(
        self, app: Any, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"
    ) -> None:
        import uvicorn

        self.config = uvicorn.Config(
            app, host=host, port=port, log_level=log_level, lifespan="on", access_log=False
        )
        self.server = uvicorn.Server(self.config)
        self._thread: threading.Thread | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.host = host

    @property
    def port(self) -> int:
        sockets = self.server.servers[0].sockets if self.server.servers else []
        return int(sockets[0].getsockname()[1]) if sockets else self.config.port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _run(self) -> None:
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self.server.serve())

    def start(self, timeout: float = 20.0) -> BackgroundServer:
        self._thread = threading.Thread(target=self._run, name="idee-agent-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("El servidor no arrancó (the server did not start).")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["BackgroundServer"]
