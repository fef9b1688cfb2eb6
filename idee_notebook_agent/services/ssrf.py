"""SSRF guard for every URL the server fetches on a user's or the model's behalf.

Web pages, GetCapabilities, WMS GetMap and the knowledge crawler all take URLs that come from a
conversation, so a request could otherwise reach the machine itself, the intranet or a cloud
metadata endpoint. The rule: only http/https, and every address a host resolves to must be public
(no loopback, private, link-local, multicast, reserved or metadata addresses). It is checked
before the request, again on every redirect (an httpx request hook), and once more when the socket
connects (a pinned network backend, so DNS rebinding between check and connect does not help).
``IDEE_ALLOW_HOSTS`` (hosts, ``*.suffix`` patterns, IPs or CIDRs) opens named exceptions, e.g.
the loopback fakes of the tests or an intranet WMS.

Use ``guarded_client(settings)`` / ``guarded_async_client(settings)`` for fetching, or
``check_url(url, settings)`` to validate a URL before handing it to another library.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from dataclasses import dataclass
from typing import Any

import httpx

from ..config import Settings, get_settings
from ..errors import ServiceError

log = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOWED_SCHEMES = ("http", "https")
USER_AGENT = "idee-notebook-agent/0.1 (+https://github.com/idee-notebook-agent/idee-notebook-agent)"

# Cloud metadata names: refused by name too, whatever they resolve to.
BLOCKED_HOSTNAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.internal",
    }
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")

_HINT = (
    "Solo se permiten servidores públicos; un administrador puede permitir hosts concretos con "
    "IDEE_ALLOW_HOSTS. (EN: only public servers are allowed.)"
)


class BlockedURLError(ServiceError):
    """The URL is not allowed: wrong scheme, or the host is (or resolves to) a non-public address."""


def is_public_ip(ip: IPAddress) -> bool:
    """True for globally routable unicast addresses only."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return is_public_ip(ip.ipv4_mapped)
        if ip in _NAT64:
            return is_public_ip(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return bool(ip.is_global) and not (
        ip.is_multicast or ip.is_reserved or ip.is_loopback or ip.is_link_local
    )


@dataclass(frozen=True)
class Policy:
    """What may be reached besides public addresses (from ``IDEE_ALLOW_HOSTS``)."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_list(cls, entries: list[str]) -> Policy:
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for raw in entries:
            entry = raw.strip().lower().strip("[]")
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry.rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> Policy:
        settings = settings or get_settings()
        return cls.from_list(settings.allowed_host_list())

    def host_allowed(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        if host in self.hosts:
            return True
        return any(
            p.startswith("*.") and (host.endswith(p[1:]) or host == p[2:]) for p in self.hosts
        )

    def ip_allowed(self, ip: IPAddress) -> bool:
        if any(ip.version == net.version and ip in net for net in self.networks):
            return True
        return is_public_ip(ip)


def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ServiceError(
            f"No se pudo resolver el nombre '{host}' ({exc}). Comprueba la URL. "
            "(EN: the host name could not be resolved.)"
        ) from exc
    addresses: list[IPAddress] = []
    for info in infos:
        text = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone id
        ip = ipaddress.ip_address(text)
        if ip not in addresses:
            addresses.append(ip)
    return addresses


def _checked_addresses(host: str, port: int, policy: Policy) -> list[IPAddress]:
    """Every address ``host`` resolves to, or BlockedURLError if any is not allowed."""
    addresses = _resolve(host, port)
    if not addresses:
        raise ServiceError(f"El nombre '{host}' no resuelve a ninguna dirección.")
    for ip in addresses:
        if not policy.ip_allowed(ip):
            shown = host if host == str(ip) else f"{host} → {ip}"
            raise BlockedURLError(
                f"Dirección bloqueada por seguridad: {shown} no es una dirección pública "
                f"(loopback, red privada, enlace local, multidifusión o metadatos). {_HINT}"
            )
    return addresses


def check_url(
    url: str | httpx.URL, settings: Settings | None = None, *, policy: Policy | None = None
) -> httpx.URL:
    """Validate ``url`` (scheme, host, resolved addresses); return it parsed, or raise.

    Raises ``BlockedURLError`` for a refused URL and ``ServiceError`` when the host cannot be
    resolved. Both are ``ToolError``s, so a tool can let them through to the model.
    """
    policy = policy or Policy.from_settings(settings)
    try:
        parsed = url if isinstance(url, httpx.URL) else httpx.URL(str(url).strip())
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise BlockedURLError(f"URL no válida: {url!r} ({exc}).") from exc
    if parsed.scheme not in ALLOWED_SCHEMES:
        raise BlockedURLError(
            f"Esquema no permitido en {str(url)[:200]!r}: solo http y https. "
            "(EN: only http/https URLs can be fetched.)"
        )
    host = (parsed.host or "").lower().rstrip(".")
    if not host:
        raise BlockedURLError(f"La URL no tiene nombre de servidor: {str(url)[:200]!r}.")
    if policy.host_allowed(host):
        return parsed
    if host in BLOCKED_HOSTNAMES:
        raise BlockedURLError(f"Dirección de metadatos bloqueada: {host}. {_HINT}")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    _checked_addresses(host, port, policy)
    return parsed


async def acheck_url(
    url: str | httpx.URL, settings: Settings | None = None, *, policy: Policy | None = None
) -> httpx.URL:
    """``check_url`` without blocking the event loop (DNS runs in a worker thread)."""
    policy = policy or Policy.from_settings(settings)
    return await asyncio.to_thread(check_url, url, policy=policy)


# ---------------------------------------------------------------------- connect-time pinning
def _pick_address(host: str, port: int, policy: Policy) -> str:
    if policy.host_allowed(host):
        return host
    return str(_checked_addresses(host, port, policy)[0])


class _GuardedBackend:
    """httpcore sync network backend that connects only to checked addresses."""

    def __init__(self, inner: Any, policy: Policy) -> None:
        self._inner = inner
        self._policy = policy

    def connect_tcp(self, host: str, port: int, **kwargs: Any) -> Any:
        return self._inner.connect_tcp(_pick_address(host, port, self._policy), port, **kwargs)

    def connect_unix_socket(self, path: str, **kwargs: Any) -> Any:
        raise BlockedURLError("Las conexiones por socket Unix no están permitidas.")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _GuardedAsyncBackend:
    """httpcore async network backend that connects only to checked addresses."""

    def __init__(self, inner: Any, policy: Policy) -> None:
        self._inner = inner
        self._policy = policy

    async def connect_tcp(self, host: str, port: int, **kwargs: Any) -> Any:
        address = await asyncio.to_thread(_pick_address, host, port, self._policy)
        return await self._inner.connect_tcp(address, port, **kwargs)

    async def connect_unix_socket(self, path: str, **kwargs: Any) -> Any:
        raise BlockedURLError("Las conexiones por socket Unix no están permitidas.")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _pin(transport: Any, backend_cls: type, policy: Policy) -> None:
    pool = getattr(transport, "_pool", None)
    if pool is not None and hasattr(pool, "_network_backend"):
        pool._network_backend = backend_cls(pool._network_backend, policy)
    else:  # httpx internals changed: the request hook still checks every hop
        log.debug("No se pudo fijar el backend de red protegido; se usa solo el hook de petición")


def _transport_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Client options that belong to the transport we build (TLS, HTTP/2, env)."""
    keys = ("verify", "cert", "http1", "http2", "trust_env", "limits")
    options = {k: kwargs.pop(k) for k in keys if k in kwargs}
    if "trust_env" in options:
        kwargs["trust_env"] = options["trust_env"]
    return options


def _timeout(settings: Settings, timeout: float | httpx.Timeout | None) -> httpx.Timeout:
    if isinstance(timeout, httpx.Timeout):
        return timeout
    return httpx.Timeout(timeout if timeout is not None else settings.http_timeout)


def guarded_client(
    settings: Settings | None = None,
    *,
    timeout: float | httpx.Timeout | None = None,
    follow_redirects: bool = True,
    max_redirects: int = 5,
    headers: dict[str, str] | None = None,
    **kwargs: Any,
) -> httpx.Client:
    """An ``httpx.Client`` that refuses non-public addresses, on every hop and every connect."""
    settings = settings or get_settings()
    policy = Policy.from_settings(settings)

    def hook(request: httpx.Request) -> None:
        check_url(request.url, policy=policy)

    transport = httpx.HTTPTransport(retries=0, **_transport_options(kwargs))
    _pin(transport, _GuardedBackend, policy)
    return httpx.Client(
        timeout=_timeout(settings, timeout),
        follow_redirects=follow_redirects,
        max_redirects=max_redirects,
        headers={"User-Agent": USER_AGENT, **(headers or {})},
        event_hooks={"request": [hook]},
        transport=transport,
        **kwargs,
    )


def guarded_async_client(
    settings: Settings | None = None,
    *,
    timeout: float | httpx.Timeout | None = None,
    follow_redirects: bool = True,
    max_redirects: int = 5,
    headers: dict[str, str] | None = None,
    **kwargs: Any,
) -> httpx.AsyncClient:
    """The async twin of ``guarded_client``."""
    settings = settings or get_settings()
    policy = Policy.from_settings(settings)

    async def hook(request: httpx.Request) -> None:
        await acheck_url(request.url, policy=policy)

    transport = httpx.AsyncHTTPTransport(retries=0, **_transport_options(kwargs))
    _pin(transport, _GuardedAsyncBackend, policy)
    return httpx.AsyncClient(
        timeout=_timeout(settings, timeout),
        follow_redirects=follow_redirects,
        max_redirects=max_redirects,
        headers={"User-Agent": USER_AGENT, **(headers or {})},
        event_hooks={"request": [hook]},
        transport=transport,
        **kwargs,
    )


__all__ = [
    "BlockedURLError",
    "Policy",
    "acheck_url",
    "check_url",
    "guarded_async_client",
    "guarded_client",
    "is_public_ip",
]
