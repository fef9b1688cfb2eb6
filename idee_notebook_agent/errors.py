"""One exception hierarchy, with messages a user can act on (Spanish first)."""

from __future__ import annotations


class IdeeAgentError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigurationError(IdeeAgentError):
    """Bad settings, providers.json, tool or skill files: fix the configuration and retry."""


class ToolError(IdeeAgentError):
    """A tool could not run; the message is fed back to the model as the tool result.

    ``data`` (e.g. ``{"candidates": [...]}``) is merged into that result so the model can act on it.
    """

    def __init__(self, message: str, *, data: dict | None = None) -> None:
        super().__init__(message)
        self.data = dict(data or {})


class ServiceError(ToolError):
    """An external service (CartoCiudad, IDEE, WMS, web page) failed or could not be reached."""


class ProviderError(IdeeAgentError):
    """The language model provider failed. ``code`` is stable for programs; the text is for people."""

    code = "provider_error"

    def __init__(self, message: str, *, provider: str = "", retryable: bool = False) -> None:
        super().__init__(message)
        self.provider = provider
        self.retryable = retryable


class ProviderAuthError(ProviderError):
    code = "auth"


class ProviderRateLimitError(ProviderError):
    code = "rate_limit"


class ProviderTimeoutError(ProviderError):
    code = "timeout"


class ModelNotFoundError(ProviderError):
    code = "model_not_found"


class ProviderUnavailableError(ProviderError):
    code = "unavailable"


class MissingExtraError(IdeeAgentError, ImportError):
    """An optional dependency is missing; the message names the extra to install."""

    def __init__(self, package: str, extra: str) -> None:
        super().__init__(
            f"Falta el paquete opcional '{package}'. Instálalo con: "
            f'pip install "idee-notebook-agent[{extra}]"'
        )
        self.package = package
        self.extra = extra
