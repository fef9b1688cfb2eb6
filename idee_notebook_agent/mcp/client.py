"""External MCP servers join the agent loop: discovery, registration, execution, reconnection.

``attach_mcp_servers`` (awaited once by ``Agent.start``) connects every server of
``mcp_servers.json``, lists its tools and registers them beside the native ones; the model calls
them like any server tool. A server down at start is reported once and skipped (and retried,
at most once every ``retry_interval`` seconds, by ``MCPManager.refresh`` on later turns); a
server that dies mid-call answers the model with a ``ToolError``; the next call reconnects.

Sessions are bound to the event loop that opened them (the notebook runs the agent on its own
background loop, the REST server on uvicorn's, ``Agent.ask`` on a fresh ``asyncio.run``), so
each server keeps one connection per running loop, opened on first use in that loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ..config import Settings
from ..errors import ToolError
from ..toolbox.registry import Executor, ToolContext, ToolRegistry
from ..toolbox.specs import ToolSpec
from .config import MCPServerConfig, load_mcp_config
from .connection import (
    Connection,
    JsonRpcConnection,
    MCPCallTimeout,
    MCPConnectionError,
    MCPRemoteError,
    SdkConnection,
)
from .results import to_model_result

log = logging.getLogger(__name__)

RETRY_INTERVAL = 60.0
"""Seconds between attempts to reach a server that was down (checked at the start of a turn)."""

# registry -> its manager, for status queries (a documented cache; weak so it never leaks).
_MANAGERS: weakref.WeakKeyDictionary[ToolRegistry, MCPManager] = weakref.WeakKeyDictionary()
_MANAGERS_LOCK = threading.Lock()


@dataclass
class RemoteTool:
    """A tool as the server lists it, and the name the model sees (OpenAI-safe)."""

    name: str
    local_name: str
    description: str
    input_schema: dict[str, Any] | None


def local_tool_name(name: str) -> str:
    """Function names the LLM APIs accept: ``[A-Za-z0-9_-]{1,64}``."""
    return (re.sub(r"[^A-Za-z0-9_-]", "_", name) or "tool")[:64]


def normalise_schema(schema: Any) -> dict[str, Any] | None:
    """The tool's ``inputSchema`` as an object schema we can validate with, or None if unusable."""
    data = dict(schema) if isinstance(schema, dict) else {}
    data.setdefault("type", "object")
    if data.get("type") != "object":
        return None
    if not isinstance(data.get("properties", {}), dict):
        return None
    data.setdefault("properties", {})
    try:
        Draft202012Validator.check_schema(data)
    except SchemaError:
        return None
    return data


@dataclass(eq=False)
class MCPServerHandle:
    """One configured server: its tools, its state, and one connection per event loop."""

    config: MCPServerConfig
    mode: str = ""
    tools: list[RemoteTool] = field(default_factory=list)
    registered: list[str] = field(default_factory=list)
    status: str = "pending"
    error: str | None = None
    last_attempt: float = 0.0
    _reported: bool = False
    _conns: dict[asyncio.AbstractEventLoop, Connection] = field(default_factory=dict)
    _locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.mode = self.mode or self.config.transport

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def origin(self) -> str:
        return f"mcp:{self.name}"

    # ------------------------------------------------------------------ connections
    async def _open(self) -> Connection:
        """Connect; a URL without an explicit transport tries the SDK, then the seed's JSON-RPC."""
        if self.mode in ("http", "sse", "stdio"):
            conn: Connection = SdkConnection(self.config, self.mode)
            await conn.open()
            return conn
        if self.mode == "jsonrpc":
            conn = JsonRpcConnection(self.config)
            await conn.open()
            return conn
        sdk = SdkConnection(self.config, "http")
        try:
            await sdk.open()
            self.mode = "http"
            return sdk
        except MCPConnectionError as sdk_error:
            plain = JsonRpcConnection(self.config)
            await plain.open()
            try:
                await plain.list_tools()
            except Exception:
                await plain.aclose()
                raise sdk_error from None
            log.info(
                "El servidor MCP '%s' no habla el protocolo MCP completo; se usa JSON-RPC simple "
                "(formato del seed).",
                self.name,
            )
            self.mode = "jsonrpc"
            return plain

    async def connection(self) -> Connection:
        """The live connection for the running loop, opened (or re-opened) when needed."""
        loop = asyncio.get_running_loop()
        with self._guard:
            for old in [lp for lp in self._conns if lp.is_closed()]:
                self._conns.pop(old, None)
                self._locks.pop(old, None)
            conn = self._conns.get(loop)
            if conn is not None and conn.alive:
                return conn
            lock = self._locks.setdefault(loop, asyncio.Lock())
        async with lock:
            with self._guard:
                conn = self._conns.get(loop)
            if conn is not None and conn.alive:
                return conn
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.aclose()
            conn = await self._open()
            with self._guard:
                self._conns[loop] = conn
            return conn

    async def _discard(self, conn: Connection) -> None:
        loop = asyncio.get_running_loop()
        with self._guard:
            if self._conns.get(loop) is conn:
                self._conns.pop(loop, None)
        with contextlib.suppress(Exception):
            await conn.aclose()

    async def aclose(self) -> None:
        """Close this loop's connection (connections of other loops close with their loop)."""
        loop = asyncio.get_running_loop()
        with self._guard:
            conn = self._conns.pop(loop, None)
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.aclose()

    # ------------------------------------------------------------------ discovery
    def _mark_down(self, reason: str) -> None:
        self.status = "down"
        self.error = reason
        if not self._reported:
            self._reported = True
            log.warning(
                "No se pudo conectar con el servidor MCP '%s' (%s): %s. Se sigue sin sus "
                "herramientas; se reintentará más tarde.",
                self.name,
                self.config.target,
                reason,
            )
        else:
            log.debug("El servidor MCP '%s' sigue sin responder: %s", self.name, reason)

    def _mark_up(self) -> None:
        if self._reported:
            log.info("El servidor MCP '%s' vuelve a responder.", self.name)
        self.status = "connected"
        self.error = None
        self._reported = False

    async def discover(self) -> list[RemoteTool]:
        """Connect and list the tools; on failure report once and return an empty list."""
        self.last_attempt = time.monotonic()
        try:
            conn = await self.connection()
            raw = await conn.list_tools()
        except (MCPConnectionError, MCPCallTimeout, MCPRemoteError, OSError) as exc:
            self._mark_down(str(exc) or type(exc).__name__)
            return []
        except Exception as exc:  # a broken server must never stop the agent from starting
            log.debug("Fallo inesperado al conectar con '%s'", self.name, exc_info=True)
            self._mark_down(f"{type(exc).__name__}: {exc}")
            return []
        self._mark_up()
        self.tools = [
            RemoteTool(
                name=str(t["name"]),
                local_name=local_tool_name(str(t["name"])),
                description=str(t.get("description") or t.get("title") or ""),
                input_schema=t.get("inputSchema"),
            )
            for t in raw
        ]
        log.info("Conectado al servidor MCP '%s' (%d herramientas)", self.name, len(self.tools))
        return self.tools

    # ------------------------------------------------------------------ execution
    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run one tool; every failure becomes a ``ToolError`` the model can read."""
        timeout = self.config.timeout
        try:
            conn = await self.connection()
        except (MCPConnectionError, MCPCallTimeout, MCPRemoteError, OSError) as exc:
            self._mark_down(str(exc))
            raise ToolError(
                f"El servidor MCP '{self.name}' no está disponible ({exc}); no se pudo ejecutar "
                f"'{tool}'. Se volverá a intentar en el próximo turno.",
                data={"server": self.name},
            ) from None
        try:
            wire = await conn.call_tool(tool, arguments)
        except MCPCallTimeout:
            raise ToolError(
                f"El servidor MCP '{self.name}' no respondió a '{tool}' en {timeout:g} s "
                "(timeout). Prueba de nuevo más tarde o con una petición más pequeña.",
                data={"server": self.name, "timeout": timeout},
            ) from None
        except MCPConnectionError as exc:
            await self._discard(conn)
            self.status = "lost"
            self.error = str(exc)
            log.warning(
                "Se perdió la conexión con el servidor MCP '%s' durante '%s': %s",
                self.name,
                tool,
                exc,
            )
            raise ToolError(
                f"Se perdió la conexión con el servidor MCP '{self.name}' mientras ejecutaba "
                f"'{tool}' ({exc}). Se reconectará en el próximo turno.",
                data={"server": self.name},
            ) from None
        except MCPRemoteError as exc:
            raise ToolError(
                f"El servidor MCP '{self.name}' rechazó la llamada a '{tool}': {exc}",
                data={"server": self.name},
            ) from None
        if self.status != "connected":
            self._mark_up()
        return to_model_result(self.name, tool, wire)

    def executor(self, tool: str) -> Executor:
        async def run_mcp_tool(args: dict[str, Any], ctx: ToolContext) -> Any:
            return await self.call(tool, dict(args))

        run_mcp_tool.__name__ = f"mcp_{local_tool_name(tool)}"
        return run_mcp_tool

    def info(self) -> dict[str, Any]:
        with self._guard:
            live = sum(1 for loop, c in self._conns.items() if c.alive and not loop.is_closed())
        return {
            "name": self.name,
            "transport": self.mode,
            "target": self.config.target,
            "timeout": self.config.timeout,
            "status": self.status,
            "error": self.error,
            "connections": live,
            "tools": [
                {
                    "name": t.local_name,
                    "remote_name": t.name,
                    "description": t.description,
                    "registered": t.local_name in self.registered,
                }
                for t in self.tools
            ],
        }


class MCPManager:
    """All configured servers of one tool registry."""

    def __init__(
        self, configs: list[MCPServerConfig], *, retry_interval: float = RETRY_INTERVAL
    ) -> None:
        self.servers = [MCPServerHandle(c) for c in configs]
        self.retry_interval = retry_interval
        self.registry: ToolRegistry | None = None

    def server(self, name: str) -> MCPServerHandle:
        return next(h for h in self.servers if h.name == name)

    async def attach(self, registry: ToolRegistry) -> int:
        """Discover every server concurrently and register their tools; return how many."""
        self.registry = registry
        await asyncio.gather(*(h.discover() for h in self.servers))
        count = sum(self._register(h) for h in self.servers if h.status == "connected")
        if self.servers:
            log.info("Registradas %d herramientas MCP en el registro de herramientas", count)
        return count

    async def refresh(self) -> int:
        """Retry servers that were down when their pause is over; never raises."""
        if self.registry is None:
            return 0
        now = time.monotonic()
        due = [
            h
            for h in self.servers
            if h.status == "down" and not h.tools and now - h.last_attempt >= self.retry_interval
        ]
        if not due:
            return 0
        try:
            await asyncio.gather(*(h.discover() for h in due))
            return sum(self._register(h) for h in due if h.status == "connected")
        except Exception:
            log.exception("Error al reintentar los servidores MCP")
            return 0

    def _register(self, handle: MCPServerHandle) -> int:
        assert self.registry is not None
        added = 0
        for tool in handle.tools:
            if tool.local_name in handle.registered:
                continue
            schema = normalise_schema(tool.input_schema)
            if schema is None:
                log.warning(
                    "La herramienta '%s' del servidor MCP '%s' tiene un inputSchema que no es un "
                    "objeto JSON Schema válido: se omite.",
                    tool.name,
                    handle.name,
                )
                continue
            description = tool.description.strip() or f"Herramienta '{tool.name}'"
            spec = ToolSpec(
                name=tool.local_name,
                description=f"{description} [servidor MCP '{handle.name}']",
                parameters=schema,
                origin=handle.origin,
            )
            if self.registry.add_tool(spec, handle.executor(tool.name)):
                handle.registered.append(tool.local_name)
                added += 1
        return added

    def status(self) -> list[dict[str, Any]]:
        return [h.info() for h in self.servers]

    async def aclose(self) -> None:
        """Close the connections of the running loop (tests, CLI)."""
        for handle in self.servers:
            await handle.aclose()


async def attach_mcp_servers(registry: ToolRegistry, settings: Settings) -> MCPManager | None:
    """Connect the servers of ``settings.mcp_servers_path`` and register their tools.

    Returns the manager (``Agent.start`` keeps it to retry servers that were down), or None when
    no file is configured. A bad file is logged and skipped: MCP is optional.
    """
    path = settings.mcp_servers_path
    if not path:
        return None
    try:
        configs = load_mcp_config(path)
    except Exception as exc:
        log.warning("Servidores MCP no cargados: %s", exc)
        return None
    manager = MCPManager(configs)
    await manager.attach(registry)
    with _MANAGERS_LOCK:
        _MANAGERS[registry] = manager
    return manager


def manager_for(registry: ToolRegistry) -> MCPManager | None:
    """The MCP manager attached to ``registry``, if any (status panels, ``mcp list``)."""
    with _MANAGERS_LOCK:
        return _MANAGERS.get(registry)
