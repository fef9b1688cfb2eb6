"""What the network providers share: user-facing error messages, tool-argument parsing, and
one SDK client per event loop.

Messages are Spanish first and never contain an API key: provider texts that may echo one are
scrubbed, and authentication errors use our own words only.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from ..errors import (
    ModelNotFoundError,
    ProviderAuthError,
    ProviderError,
    ProviderRateLimitError,
    ProviderTimeoutError,
    ProviderUnavailableError,
)

RAW_ARGS_KEY = "__raw__"
"""Arguments that were not a JSON object travel as ``{"__raw__": text}`` so that the tool
registry's validation answers the model instead of running the tool."""

MAX_RETRIES_CAP = 5
"""Upper bound on SDK retries, whatever the configuration says (a turn must never hang)."""

_DISPLAY = {"openai": "OpenAI", "gemini": "Gemini", "google": "Gemini"}
_KEY_ENV = {"openai": "OPENAI_API_KEY", "gemini": "GOOGLE_API_KEY (o GEMINI_API_KEY)"}


def display_name(name: str) -> str:
    """``openai`` → ``OpenAI``; a providers.json name (``groq``) stays as configured."""
    return _DISPLAY.get(name.lower(), name)


def bounded_retries(value: int | None) -> int:
    try:
        return max(0, min(int(value or 0), MAX_RETRIES_CAP))
    except (TypeError, ValueError):
        return 0


def scrub(text: str, key: str | None, limit: int = 300) -> str:
    """A provider's message, cut to ``limit`` characters and without the key in it."""
    text = " ".join(str(text or "").split())
    if key:
        text = text.replace(key, "***")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_tool_args(text: str | None) -> dict[str, Any]:
    """The model's argument text as a dict; anything else becomes ``{"__raw__": text}``."""
    if text is None or not str(text).strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {RAW_ARGS_KEY: str(text)}
    if isinstance(value, str):  # some models double-encode the object
        try:
            inner = json.loads(value)
        except ValueError:
            inner = None
        if isinstance(inner, dict):
            return inner
    if isinstance(value, dict):
        return value
    return {RAW_ARGS_KEY: str(text)}


# ---------------------------------------------------------------------- error constructors
def _with_status(exc: ProviderError, status: int | None) -> ProviderError:
    exc.status_code = status  # type: ignore[attr-defined]
    return exc


def missing_key_error(name: str, kind: str) -> ProviderAuthError:
    label = display_name(name)
    env = _KEY_ENV.get(kind, "la variable indicada en 'api_key_env' de providers.json")
    err = ProviderAuthError(
        f"No hay ninguna clave de API para {label}. Define {env} en el entorno o en .env, "
        "o escribe tu clave en los ajustes del chat. "
        f"(EN: no API key configured for {label}.)",
        provider=name,
    )
    return _with_status(err, None)  # type: ignore[return-value]


def auth_error(name: str, status: int | None) -> ProviderAuthError:
    label = display_name(name)
    code = f" (HTTP {status})" if status else ""
    err = ProviderAuthError(
        f"La clave de {label} no es válida o no tiene permiso para usar este modelo{code}. "
        "Revisa la clave en los ajustes del chat o en la configuración y vuelve a intentarlo. "
        f"(EN: the {label} API key is invalid or lacks permission.)",
        provider=name,
    )
    return _with_status(err, status)  # type: ignore[return-value]


def rate_limit_error(name: str, retries: int, quota: bool = False) -> ProviderRateLimitError:
    label = display_name(name)
    if quota:
        text = (
            f"Se ha agotado la cuota de la cuenta de {label} (HTTP 429). Revisa el plan o la "
            "facturación de esa cuenta, o usa otra clave o proveedor. "
            f"(EN: {label} quota exhausted.)"
        )
    else:
        tried = f" tras {retries} reintento{'s' if retries != 1 else ''}" if retries else ""
        text = (
            f"{label} está limitando las peticiones (HTTP 429) y las sigue rechazando{tried}. "
            "Espera un minuto y vuelve a intentarlo, o elige otro modelo o proveedor. "
            f"(EN: rate limited by {label}; try again shortly.)"
        )
    err = ProviderRateLimitError(text, provider=name, retryable=not quota)
    return _with_status(err, 429)  # type: ignore[return-value]


def timeout_error(name: str, timeout: float) -> ProviderTimeoutError:
    label = display_name(name)
    err = ProviderTimeoutError(
        f"{label} no respondió en {timeout:g} s. Vuelve a intentarlo; si se repite, elige un "
        "modelo más rápido o aumenta IDEE_LLM_TIMEOUT. "
        f"(EN: {label} did not answer in time.)",
        provider=name,
        retryable=True,
    )
    return _with_status(err, None)  # type: ignore[return-value]


def model_not_found_error(name: str, model: str, status: int | None = 404) -> ModelNotFoundError:
    label = display_name(name)
    err = ModelNotFoundError(
        f"El modelo '{model}' no existe en {label} o tu clave no tiene acceso a él "
        f"(HTTP {status or 404}). Elige otro modelo de la lista (o revisa la base_url del "
        f"proveedor). (EN: model '{model}' not found.)",
        provider=name,
    )
    return _with_status(err, status)  # type: ignore[return-value]


def unavailable_error(name: str, status: int | None = None) -> ProviderUnavailableError:
    label = display_name(name)
    if status:
        text = (
            f"{label} no está disponible ahora mismo (HTTP {status}). Vuelve a intentarlo en "
            f"unos minutos. (EN: {label} is unavailable.)"
        )
    else:
        text = (
            f"No se pudo conectar con {label}. Comprueba la conexión a internet o la base_url "
            f"del proveedor y vuelve a intentarlo. (EN: could not reach {label}.)"
        )
    err = ProviderUnavailableError(text, provider=name, retryable=True)
    return _with_status(err, status)  # type: ignore[return-value]


def rejected_error(name: str, status: int | None, detail: str) -> ProviderError:
    label = display_name(name)
    code = f" (HTTP {status})" if status else ""
    tail = f": {detail}" if detail else "."
    err = ProviderError(
        f"{label} rechazó la petición{code}{tail} (EN: {label} rejected the request.)",
        provider=name,
    )
    return _with_status(err, status)


def by_status(
    name: str,
    status: int,
    *,
    model: str,
    retries: int,
    detail: str,
    quota: bool = False,
) -> ProviderError:
    """The error for an HTTP status that survived the SDK's retries."""
    if status in (401, 403):
        return auth_error(name, status)
    if status == 404:
        return model_not_found_error(name, model, status)
    if status == 429:
        return rate_limit_error(name, retries, quota)
    if status == 408:
        return unavailable_error(name, status)
    if status >= 500:
        return unavailable_error(name, status)
    return rejected_error(name, status, detail)


# ---------------------------------------------------------------------- per-loop clients
T = TypeVar("T")


class PerLoopClients(Generic[T]):
    """One SDK client per running event loop.

    Pooled connections belong to the loop that opened them; a provider object is cached by the
    registry and may serve ``Agent.ask`` (a fresh loop per call), the server loop and the
    notebook's background loop alike.
    """

    def __init__(self, factory: Callable[[], T], closer: Callable[[T], Awaitable[None]]) -> None:
        self._factory = factory
        self._closer = closer
        self._clients: dict[asyncio.AbstractEventLoop, T] = {}
        self._lock = threading.Lock()

    def get(self) -> T:
        loop = asyncio.get_running_loop()
        with self._lock:
            for stale in [lp for lp in self._clients if lp.is_closed()]:
                del self._clients[stale]  # its sockets go with the garbage collector
            client = self._clients.get(loop)
            if client is None:
                client = self._factory()
                self._clients[loop] = client
            return client

    async def aclose(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, {}
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, client in clients.items():
            try:
                if loop is current:
                    await self._closer(client)
                elif loop.is_running():
                    asyncio.run_coroutine_threadsafe(self._closer(client), loop)
            except Exception:  # closing is best effort
                continue
