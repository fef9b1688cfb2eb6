"""Which providers exist (providers.json + environment + the offline planner) and their clients.

Per-call ``provider``/``model``/``api_key`` overrides are honoured for that call only; keys are
kept as ``SecretStr`` and the client cache is keyed by a hash of the key, never the key itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from ..config import Settings, get_settings
from ..errors import ConfigurationError
from .base import ChatProvider

log = logging.getLogger(__name__)

KINDS = ("openai", "gemini", "offline", "scripted")
DEFAULT_MODELS = {"openai": "gpt-4o-mini", "gemini": "gemini-2.5-flash", "offline": "planner"}


@dataclass
class ProviderConfig:
    """One selectable provider. ``models`` maps label → model id (the seed's ``model_map``)."""

    name: str
    kind: str = "openai"
    base_url: str | None = None
    api_key: SecretStr | None = None
    api_key_env: str | None = None
    default_model: str | None = None
    models: dict[str, str] = field(default_factory=dict)

    def key(self) -> str | None:
        if self.api_key is not None and self.api_key.get_secret_value():
            return self.api_key.get_secret_value()
        if self.api_key_env:
            return os.environ.get(self.api_key_env) or None
        return None

    @property
    def model_default(self) -> str:
        if self.default_model:
            return self.default_model
        if self.models:
            return next(iter(self.models.values()))
        return DEFAULT_MODELS.get(self.kind, "")

    def public(self) -> dict[str, Any]:
        """The ``GET /providers/`` entry: never keys or URLs (CONTRACT 3.1)."""
        models = [{"id": mid, "label": label} for label, mid in self.models.items()]
        if not models and self.model_default:
            models = [{"id": self.model_default, "label": self.model_default}]
        return {"name": self.name, "models": models, "default_model": self.model_default}

    @classmethod
    def from_dict(cls, data: dict[str, Any], origin: str) -> ProviderConfig:
        if not isinstance(data, dict) or not data.get("name"):
            raise ConfigurationError(f"{origin}: cada proveedor necesita 'name'.")
        kind = str(data.get("kind") or data.get("type") or "openai").lower()
        if kind not in KINDS:
            raise ConfigurationError(
                f"{origin}: tipo de proveedor '{kind}' desconocido ({', '.join(KINDS)})."
            )
        models = data.get("model_map") or {}
        if isinstance(data.get("models"), list):
            models = {**{str(m): str(m) for m in data["models"]}, **models}
        key = data.get("api_key")
        return cls(
            name=str(data["name"]),
            kind=kind,
            base_url=data.get("base_url"),
            api_key=SecretStr(key) if key else None,
            api_key_env=data.get("api_key_env"),
            default_model=data.get("default_model"),
            models={str(k): str(v) for k, v in models.items()},
        )


def load_providers_file(path: Path) -> list[ProviderConfig]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigurationError(f"No existe el fichero de proveedores {path}.") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"No se pudo leer {path}: {exc}") from exc
    if not isinstance(data, list):
        raise ConfigurationError(f"{path}: se esperaba una lista JSON de proveedores.")
    return [ProviderConfig.from_dict(item, str(path)) for item in data]


def _close_soon(provider: ChatProvider) -> None:
    """Release an evicted client's connections when we are inside an event loop (else GC does)."""
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    task = loop.create_task(provider.aclose())
    task.add_done_callback(lambda t: t.cancelled() or t.exception())


def _key_hash(key: str | None) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16] if key else "-"


class ProviderRegistry:
    """Configured providers plus a small thread-safe LRU cache of their clients."""

    def __init__(
        self,
        configs: list[ProviderConfig],
        settings: Settings | None = None,
        default: str | None = None,
        cache_size: int = 32,
    ) -> None:
        self.settings = settings or get_settings()
        self.configs: dict[str, ProviderConfig] = {}
        for cfg in configs:
            self.configs.setdefault(cfg.name.lower(), cfg)
        self._default = default
        self._cache: OrderedDict[tuple[str, str], ChatProvider] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._instances: dict[str, ChatProvider] = {}

    @classmethod
    def from_settings(cls, settings: Settings | None = None) -> ProviderRegistry:
        settings = settings or get_settings()
        configs: list[ProviderConfig] = []
        if settings.providers_file:
            configs.extend(load_providers_file(settings.providers_file))
        names = {c.name.lower() for c in configs}
        if "openai" not in names and (settings.openai_api_key or settings.openai_base_url):
            configs.append(
                ProviderConfig(
                    name="openai",
                    kind="openai",
                    base_url=settings.openai_base_url,
                    api_key=settings.openai_api_key,
                    default_model=settings.llm_model
                    if (settings.llm_provider or "").lower() == "openai"
                    else None,
                )
            )
        if "gemini" not in names and (settings.google_api_key or settings.gemini_base_url):
            configs.append(
                ProviderConfig(
                    name="gemini",
                    kind="gemini",
                    base_url=settings.gemini_base_url,
                    api_key=settings.google_api_key,
                    default_model=settings.llm_model
                    if (settings.llm_provider or "").lower() == "gemini"
                    else None,
                )
            )
        if "offline" not in names:
            configs.append(ProviderConfig(name="offline", kind="offline", default_model="planner"))
        return cls(configs, settings, default=settings.llm_provider)

    # ------------------------------------------------------------------ queries
    def names(self) -> list[str]:
        return [c.name for c in self.configs.values()]

    def public(self) -> list[dict[str, Any]]:
        default = self.default_name()
        ordered = sorted(self.configs.values(), key=lambda c: c.name.lower() != default.lower())
        return [c.public() for c in ordered]

    def default_name(self) -> str:
        if self._default:
            return self._default
        for cfg in self.configs.values():
            if cfg.kind not in ("offline", "scripted") and cfg.key():
                return cfg.name
        for cfg in self.configs.values():
            if cfg.kind not in ("offline", "scripted") and cfg.base_url:
                return cfg.name  # keyless OpenAI-compatible endpoint such as Ollama
        return "offline"

    def get_config(self, name: str | None) -> ProviderConfig:
        wanted = (name or self.default_name()).lower()
        cfg = self.configs.get(wanted)
        if cfg is None:
            raise ConfigurationError(
                f"Proveedor '{name}' no encontrado. Disponibles: {', '.join(self.names())}"
            )
        return cfg

    def register_instance(
        self, name: str, provider: ChatProvider, *, default_model: str | None = None
    ) -> None:
        """Make a ready provider object selectable by name (tests, notebooks, custom providers)."""
        cfg = ProviderConfig(
            name=name, kind="scripted", default_model=default_model or provider.default_model
        )
        self.configs[name.lower()] = cfg
        self._instances[name.lower()] = provider

    # ------------------------------------------------------------------ clients
    def resolve(
        self, provider: str | None = None, model: str | None = None, api_key: str | None = None
    ) -> tuple[ChatProvider, str]:
        """The provider client and model to use for one call; ``api_key`` is used, not stored."""
        cfg = self.get_config(provider)
        chosen_model = model or cfg.model_default
        instance = self._instances.get(cfg.name.lower())
        if instance is not None:
            return instance, chosen_model
        key = api_key or cfg.key()
        cache_key = (cfg.name.lower(), _key_hash(key))
        with self._lock:
            client = self._cache.get(cache_key)
            if client is not None:
                self._cache.move_to_end(cache_key)
                return client, chosen_model
        client = self._build(cfg, key)
        evicted: list[ChatProvider] = []
        with self._lock:
            self._cache[cache_key] = client
            self._cache.move_to_end(cache_key)
            while len(self._cache) > self._cache_size:
                evicted.append(self._cache.popitem(last=False)[1])
        for old in evicted:
            _close_soon(old)
        return client, chosen_model

    def _build(self, cfg: ProviderConfig, key: str | None) -> ChatProvider:
        s = self.settings
        if cfg.kind == "offline":
            from .offline import OfflinePlanner

            return OfflinePlanner(settings=s)
        if cfg.kind == "openai":
            from .openai_provider import OpenAIProvider as provider_class
        elif cfg.kind == "gemini":
            from .gemini_provider import GeminiProvider as provider_class
        else:
            raise ConfigurationError(f"El proveedor '{cfg.name}' no tiene cliente ({cfg.kind}).")
        return provider_class(
            name=cfg.name,
            api_key=key,
            base_url=cfg.base_url,
            default_model=cfg.model_default,
            timeout=s.llm_timeout,
            max_retries=s.llm_max_retries,
            temperature=s.llm_temperature,
        )

    def cache_info(self) -> dict[str, int]:
        with self._lock:
            return {"size": len(self._cache), "max": self._cache_size}
