"""``mcp_servers.json``: which external MCP servers to connect, and how.

Accepted shapes, so files written for the seed and for desktop assistants load unchanged:

* the seed's array (CONTRACT.md section 11): ``[{"name", "url", "timeout"}]``, plus a stdio form
  ``{"name", "command", "args", "env", "cwd"}``;
* the desktop-assistant object ``{"mcpServers": {"<name>": {"url" | "command", ...}}}``.

Optional keys: ``transport`` (``"http"`` streamable HTTP with the SDK, ``"sse"`` the older SSE
transport, ``"jsonrpc"`` the seed's plain JSON-RPC, ``"stdio"``; by default a ``url`` tries the SDK first and falls back to plain
JSON-RPC), ``headers`` (e.g. ``Authorization``), ``enabled``. ``${VAR}`` in ``env`` and
``headers`` values is read from the environment, so secrets stay out of the file.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError

DEFAULT_TIMEOUT = 30.0
TRANSPORTS = ("auto", "http", "sse", "jsonrpc", "stdio")
_ALIASES = {
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
    "plain": "jsonrpc",
    "json-rpc": "jsonrpc",
}


@dataclass
class MCPServerConfig:
    """One external server. ``transport`` is ``auto`` for a URL without an explicit choice."""

    name: str
    transport: str = "auto"
    url: str | None = None
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT

    @property
    def target(self) -> str:
        """Where the server is, for messages (never headers or environment values)."""
        if self.command:
            return " ".join([self.command, *self.args])
        return self.url or ""

    @classmethod
    def from_dict(cls, data: Any, *, name: str | None = None, where: str = "") -> MCPServerConfig:
        if not isinstance(data, dict):
            raise ConfigurationError(
                f"{where}: cada servidor MCP debe ser un objeto JSON con 'name' y 'url' o 'command'."
            )
        label = str(name or data.get("name") or "").strip()
        if not label:
            raise ConfigurationError(f"{where}: falta 'name' en un servidor MCP.")
        url = data.get("url")
        command = data.get("command")
        transport = str(data.get("transport") or data.get("type") or "").strip().lower()
        transport = _ALIASES.get(transport, transport)
        if not transport:
            transport = "stdio" if command else "auto"
        if transport not in TRANSPORTS:
            raise ConfigurationError(
                f"{where}: transporte '{transport}' desconocido en el servidor MCP '{label}'. "
                f"Usa uno de: {', '.join(TRANSPORTS)}."
            )
        if transport == "stdio" and not command:
            raise ConfigurationError(
                f"{where}: el servidor MCP '{label}' usa stdio pero no tiene 'command'."
            )
        if transport != "stdio" and not url:
            raise ConfigurationError(
                f"{where}: el servidor MCP '{label}' necesita 'url' (HTTP) o 'command' (stdio)."
            )
        if url is not None and not re.match(r"^https?://", str(url)):
            raise ConfigurationError(
                f"{where}: la URL del servidor MCP '{label}' debe empezar por http:// o https://."
            )
        try:
            timeout = float(data.get("timeout", DEFAULT_TIMEOUT))
        except (TypeError, ValueError):
            timeout = -1.0
        if timeout <= 0:
            raise ConfigurationError(
                f"{where}: 'timeout' del servidor MCP '{label}' debe ser un número de segundos > 0."
            )
        args = data.get("args") or []
        if not isinstance(args, list):
            raise ConfigurationError(
                f"{where}: 'args' del servidor MCP '{label}' debe ser una lista."
            )
        return cls(
            name=label,
            transport=transport,
            url=str(url).strip() if url else None,
            command=str(command) if command else None,
            args=[str(a) for a in args],
            env=_string_map(data.get("env"), "env", label, where),
            cwd=str(data["cwd"]) if data.get("cwd") else None,
            headers=_string_map(data.get("headers"), "headers", label, where),
            timeout=timeout,
        )


def _string_map(value: Any, key: str, label: str, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigurationError(f"{where}: '{key}' del servidor MCP '{label}' debe ser un objeto.")
    return {str(k): os.path.expandvars(str(v)) for k, v in value.items()}


def parse_mcp_config(data: Any, where: str = "mcp_servers.json") -> list[MCPServerConfig]:
    """Server configs from the decoded JSON; disabled entries are left out."""
    if isinstance(data, dict) and isinstance(data.get("mcpServers"), dict):
        items = [
            (name, entry)
            for name, entry in data["mcpServers"].items()
            if not (isinstance(entry, dict) and entry.get("enabled") is False)
        ]
        configs = [MCPServerConfig.from_dict(e, name=n, where=where) for n, e in items]
    elif isinstance(data, list):
        configs = [
            MCPServerConfig.from_dict(e, where=where)
            for e in data
            if not (isinstance(e, dict) and e.get("enabled") is False)
        ]
    else:
        raise ConfigurationError(
            f"{where}: se esperaba una lista de servidores MCP o un objeto con 'mcpServers'."
        )
    seen: set[str] = set()
    for cfg in configs:
        if cfg.name in seen:
            raise ConfigurationError(f"{where}: el servidor MCP '{cfg.name}' aparece dos veces.")
        seen.add(cfg.name)
    return configs


def load_mcp_config(path: Path | str) -> list[MCPServerConfig]:
    """Read ``mcp_servers.json``; a clear ConfigurationError when it is missing or malformed."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigurationError(
            f"No existe el fichero de servidores MCP '{path}' (MCP_SERVERS_PATH). "
            "Créalo o quita la variable."
        ) from None
    except OSError as exc:
        raise ConfigurationError(f"No se pudo leer '{path}': {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(
            f"'{path}' no es JSON válido (línea {exc.lineno}, columna {exc.colno}): {exc.msg}"
        ) from exc
    return parse_mcp_config(data, str(path))
