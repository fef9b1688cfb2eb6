"""One live connection to one MCP server, on the event loop that opened it.

``SdkConnection`` talks MCP through the official SDK (streamable HTTP, SSE or stdio). The SDK's
``Client`` is an async context whose task group must be entered and left by the same task, and
a transport failure (a server killed mid-call) cancels whatever task holds it. So a dedicated
*owner* task holds the context for the connection's life; callers only send requests through
it and race them against the owner's death, which turns a dying server into an error for that
call instead of a cancelled agent turn.

``JsonRpcConnection`` is the seed's plain JSON-RPC over HTTP (CONTRACT.md section 11): no
``initialize`` handshake, no session, only ``tools/list`` and ``tools/call``.

Both return results in MCP wire shape (camelCase dicts) and raise the three errors below.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol, TextIO

from .config import MCPServerConfig

log = logging.getLogger(__name__)

CLOSE_TIMEOUT = 10.0
"""Seconds to wait for a connection (and a stdio child process) to shut down cleanly."""
GRACE = 5.0
"""Extra seconds over the server's timeout before a call is abandoned if the SDK never answers."""


class MCPConnectionError(Exception):
    """The server could not be reached, or the connection broke (the server died)."""


class MCPCallTimeout(Exception):
    """The server did not answer within its configured timeout; the connection stays usable."""


class MCPRemoteError(Exception):
    """The server answered with a JSON-RPC error (unknown tool, invalid arguments...)."""


class Connection(Protocol):
    @property
    def alive(self) -> bool: ...

    async def open(self) -> None: ...

    async def list_tools(self) -> list[dict[str, Any]]: ...

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...


def describe(exc: BaseException | None) -> str:
    """A one-line reason from an exception, unwrapping the SDK's exception groups."""
    while exc is not None and getattr(exc, "exceptions", None):  # (Base)ExceptionGroup
        exc = exc.exceptions[0]  # type: ignore[union-attr]
    if exc is None:
        return "el servidor cerró la conexión"
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _errlog() -> TextIO:
    """Where a stdio server's stderr goes: the real process stderr, which has a file descriptor
    also inside Jupyter (whose ``sys.stderr`` has none), else /dev/null."""
    for stream in (sys.__stderr__, sys.stderr):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    return open(os.devnull, "w")  # kept open: the child process writes to it


class SdkConnection:
    """An MCP session through the official SDK, held by an owner task on the current loop."""

    def __init__(self, config: MCPServerConfig, transport: str) -> None:
        self.config = config
        self.transport = transport
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self._settled: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._dead: asyncio.Event | None = None

    @property
    def alive(self) -> bool:
        return self._client is not None and self._dead is not None and not self._dead.is_set()

    def _transport(self) -> Any:
        cfg = self.config
        if self.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=cfg.command or "", args=cfg.args, env=cfg.env or None, cwd=cfg.cwd
            )
            return stdio_client(params, errlog=_errlog())
        if self.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(cfg.url or "", headers=cfg.headers or None, timeout=cfg.timeout)
        return _streamable_http(cfg.url or "", cfg.headers)

    async def open(self) -> None:
        from mcp import Client
        from mcp.types import Implementation

        from .. import __version__

        self._settled, self._stop, self._dead = asyncio.Event(), asyncio.Event(), asyncio.Event()
        client = Client(
            self._transport(),
            read_timeout_seconds=self.config.timeout,
            client_info=Implementation(name="idee-notebook-agent", version=__version__),
            cache=None,
        )
        self._task = asyncio.create_task(self._own(client), name=f"mcp:{self.config.name}")
        try:
            await asyncio.wait_for(self._settled.wait(), self.config.timeout)
        except asyncio.TimeoutError:
            await self.aclose()
            raise MCPConnectionError(
                f"sin respuesta en {self.config.timeout:g} s al conectar"
            ) from None
        if not self.alive:
            await self.aclose()
            raise MCPConnectionError(describe(self._error))

    async def _own(self, client: Any) -> None:
        assert self._settled is not None and self._stop is not None and self._dead is not None
        try:
            async with client:
                self._client = client
                self._settled.set()
                await self._stop.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the SDK raises exception groups from its task groups
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            self._error = exc
            log.debug("La sesión MCP con '%s' terminó: %s", self.config.name, describe(exc))
        finally:
            self._client = None
            self._dead.set()
            self._settled.set()

    async def _request(self, make: Callable[[Any], Awaitable[Any]]) -> Any:
        """Run one request, racing it against the owner's death and a timeout backstop."""
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT
        from pydantic import ValidationError

        client = self._client
        if client is None or self._dead is None or self._dead.is_set():
            raise MCPConnectionError(describe(self._error))
        call = asyncio.ensure_future(make(client))
        dead = asyncio.ensure_future(self._dead.wait())
        try:
            done, _ = await asyncio.wait(
                {call, dead},
                timeout=self.config.timeout + GRACE,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            dead.cancel()
            if not call.done():
                call.cancel()
        if call in done and call.cancelled():  # the SDK tore the request down with the session
            raise MCPConnectionError(describe(self._error))
        if call in done:
            try:
                return call.result()
            except MCPError as exc:
                if exc.code == REQUEST_TIMEOUT:
                    raise MCPCallTimeout(str(exc)) from None
                if exc.code == CONNECTION_CLOSED:
                    raise MCPConnectionError(describe(self._error) or str(exc)) from None
                raise MCPRemoteError(exc.error.message if exc.error else str(exc)) from None
            except ValidationError as exc:
                raise MCPRemoteError(f"respuesta no válida del servidor: {describe(exc)}") from None
            except (OSError, EOFError) as exc:
                raise MCPConnectionError(describe(exc)) from None
            except Exception as exc:  # anyio stream errors and other transport failures
                if self._dead.is_set() or type(exc).__module__.startswith(("anyio", "httpx")):
                    raise MCPConnectionError(describe(self._error or exc)) from None
                raise MCPRemoteError(describe(exc)) from None
        if dead in done:
            raise MCPConnectionError(describe(self._error))
        raise MCPCallTimeout(f"sin respuesta en {self.config.timeout:g} s")

    async def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _page in range(50):  # a paginator that never ends must not hang start-up
            page = await self._request(lambda c, cur=cursor: c.list_tools(cursor=cur))
            tools.extend(
                t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in page.tools
            )
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self._request(
            lambda c: c.call_tool(name, arguments, read_timeout_seconds=self.config.timeout)
        )
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is None or task.done():
            return
        if self._stop is not None:
            self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), CLOSE_TIMEOUT)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            task.cancel()
        except Exception:
            log.debug("Error al cerrar la sesión MCP '%s'", self.config.name, exc_info=True)


@asynccontextmanager
async def _streamable_http(url: str, headers: dict[str, str]) -> Any:
    """The SDK's streamable HTTP transport, with our headers (e.g. Authorization) when given."""
    from mcp.client.streamable_http import streamable_http_client

    if not headers:
        async with streamable_http_client(url) as streams:
            yield streams
        return
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


class JsonRpcConnection:
    """The seed's plain JSON-RPC over HTTP POST: ``tools/list`` and ``tools/call`` only."""

    def __init__(self, config: MCPServerConfig) -> None:
        self.config = config
        self.url = (config.url or "").rstrip("/")
        self._ids = itertools.count(1)
        self._http: Any = None
        self._broken = False

    @property
    def alive(self) -> bool:
        return self._http is not None and not self._broken

    async def open(self) -> None:
        import httpx

        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(self.config.timeout),
            headers={"Content-Type": "application/json", **self.config.headers},
        )

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        import httpx

        if self._http is None:
            raise MCPConnectionError("la conexión está cerrada")
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params:
            body["params"] = params
        try:
            response = await self._http.post(self.url, json=body)
        except httpx.TimeoutException:
            raise MCPCallTimeout(f"sin respuesta en {self.config.timeout:g} s") from None
        except httpx.TransportError as exc:
            self._broken = True
            raise MCPConnectionError(describe(exc)) from None
        if response.status_code >= 400:
            raise MCPRemoteError(f"HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            raise MCPRemoteError("la respuesta no es JSON") from None
        if not isinstance(data, dict):
            raise MCPRemoteError("la respuesta no es un objeto JSON-RPC")
        if data.get("error") is not None:
            error = data["error"] if isinstance(data["error"], dict) else {"message": data["error"]}
            raise MCPRemoteError(f"{error.get('message', 'error')} (código {error.get('code')})")
        result = data.get("result")
        return result if isinstance(result, dict) else {}

    async def list_tools(self) -> list[dict[str, Any]]:
        tools = (await self.request("tools/list")).get("tools") or []
        return [t for t in tools if isinstance(t, dict) and t.get("name")]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.request("tools/call", {"name": name, "arguments": arguments})

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            with contextlib.suppress(Exception):
                await http.aclose()
