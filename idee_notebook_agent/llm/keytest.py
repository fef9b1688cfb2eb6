"""Test a user's API key by listing the provider's models (REST ``/test-key/``, widget Test button).

Answers with the CONTRACT 3.2 shapes. The key is used for that one request: a fresh client is
built and closed (the registry's cache is not touched), and the key is never stored or logged.
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import ConfigurationError, ProviderError
from .registry import ProviderConfig, ProviderRegistry

log = logging.getLogger(__name__)

KEY_TEST_TIMEOUT = 15.0
"""Seconds, as the original server (CONTRACT 3.2)."""


async def test_api_key(registry: ProviderRegistry, provider: str, api_key: str) -> dict[str, Any]:
    """``{"valid": True, "provider", "models"}`` or ``{"valid": False, "error"}``."""
    api_key = (api_key or "").strip()
    provider = (provider or "").strip()
    if not api_key:
        return {"valid": False, "error": "API key es requerida"}
    if not provider:
        return {"valid": False, "error": "Nombre del proveedor es requerido"}
    try:
        cfg = registry.get_config(provider)
    except ConfigurationError as exc:
        return {"valid": False, "error": str(exc)}
    if cfg.kind not in ("openai", "gemini"):
        return {
            "valid": False,
            "error": f"El proveedor '{cfg.name}' no usa claves de API: no hay nada que probar.",
        }
    client = _build(cfg, api_key)
    try:
        models = await client.list_models()
    except ProviderError as exc:
        status = getattr(exc, "status_code", None)
        log.info("Prueba de clave para %s: rechazada (%s)", cfg.name, status or exc.code)
        if status:
            return {"valid": False, "error": f"HTTP {status}: API key rechazada para '{cfg.name}'"}
        return {"valid": False, "error": str(exc)}
    except Exception as exc:  # anything else is reported, never raised to the endpoint
        log.warning("Prueba de clave para %s: %s", cfg.name, type(exc).__name__)
        return {"valid": False, "error": str(exc).replace(api_key, "***")}
    finally:
        try:
            await client.aclose()
        except Exception:
            log.debug("No se pudo cerrar el cliente de prueba", exc_info=True)
    return {"valid": True, "provider": cfg.name, "models": sorted(set(models))}


def _build(cfg: ProviderConfig, api_key: str) -> Any:
    """A one-off client: no retries (a key test must answer quickly), 15 s timeout."""
    common: dict[str, Any] = {
        "name": cfg.name,
        "api_key": api_key,
        "base_url": cfg.base_url,
        "default_model": cfg.model_default,
        "timeout": KEY_TEST_TIMEOUT,
        "max_retries": 0,
    }
    if cfg.kind == "gemini":
        from .gemini_provider import GeminiProvider

        return GeminiProvider(**common)
    from .openai_provider import OpenAIProvider

    return OpenAIProvider(**common)


test_api_key.__test__ = False  # type: ignore[attr-defined]  # not a pytest test despite its name
