from __future__ import annotations

import json

import pytest

from idee_notebook_agent.config import Settings
from idee_notebook_agent.errors import ConfigurationError
from idee_notebook_agent.llm.registry import ProviderConfig, ProviderRegistry
from idee_notebook_agent.llm.scripted import ScriptedProvider


def settings(**env) -> Settings:
    return Settings(_env_file=None, **env)


def test_offline_is_default_without_keys():
    registry = ProviderRegistry.from_settings(settings())
    assert registry.default_name() == "offline"
    provider, model = registry.resolve()
    assert provider.name == "offline" and model == "planner"


def test_providers_file_seed_format_and_public_listing_hides_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("GROQ_KEY", "gsk-secret-env")
    path = tmp_path / "providers.json"
    path.write_text(
        json.dumps(
            [
                {
                    "name": "groq",
                    "base_url": "https://api.groq.com/openai/v1",
                    "api_key": "gsk-secret-inline",
                    "model_map": {"Llama 3.1 70B": "llama-3.1-70b-versatile"},
                },
                {"name": "ollama", "base_url": "http://127.0.0.1:11434/v1", "models": ["llama3.1"]},
                {"name": "env", "base_url": "http://127.0.0.1:1/v1", "api_key_env": "GROQ_KEY"},
            ]
        )
    )
    registry = ProviderRegistry.from_settings(settings(IDEE_PROVIDERS_FILE=str(path)))
    public = registry.public()
    text = json.dumps(public)
    assert "secret" not in text and "base_url" not in text and "127.0.0.1" not in text
    groq = next(p for p in public if p["name"] == "groq")
    assert groq == {
        "name": "groq",
        "models": [{"id": "llama-3.1-70b-versatile", "label": "Llama 3.1 70B"}],
        "default_model": "llama-3.1-70b-versatile",
    }
    assert registry.default_name() == "groq" and public[0]["name"] == "groq"
    assert registry.get_config("ENV").key() == "gsk-secret-env"
    assert registry.get_config("GROQ").name == "groq"  # case-insensitive, as the seed


def test_unknown_provider_names_the_available_ones():
    registry = ProviderRegistry.from_settings(settings())
    with pytest.raises(ConfigurationError, match="Disponibles: offline"):
        registry.resolve("nadie")


@pytest.mark.parametrize(
    "content", ["{", "{}", '[{"base_url": "x"}]', '[{"name": "x", "kind": "llama"}]']
)
def test_bad_providers_file_is_a_configuration_error(tmp_path, content):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(ConfigurationError):
        ProviderRegistry.from_settings(settings(IDEE_PROVIDERS_FILE=str(path)))


def test_client_cache_is_keyed_by_key_hash_and_bounded():
    built: list[str | None] = []

    class Registry(ProviderRegistry):
        def _build(self, cfg, key):
            built.append(key)
            return ScriptedProvider()

    registry = Registry(
        [ProviderConfig(name="p", kind="openai", base_url="http://x")], settings(), cache_size=2
    )
    a, _ = registry.resolve("p", api_key="k1")
    b, _ = registry.resolve("p", api_key="k1")
    assert a is b and built == ["k1"]
    registry.resolve("p", api_key="k2")
    registry.resolve("p", api_key="k3")
    assert registry.cache_info() == {"size": 2, "max": 2}
    registry.resolve("p", api_key="k1")
    assert built == ["k1", "k2", "k3", "k1"]
    assert all("k1" not in str(key) for key in registry._cache)


def test_env_keys_add_builtin_providers():
    registry = ProviderRegistry.from_settings(
        settings(
            OPENAI_API_KEY="sk-x",
            GOOGLE_API_KEY="g-x",
            LLM_PROVIDER="gemini",
            LLM_MODEL="gemini-2.5-pro",
        )
    )
    assert {"openai", "gemini", "offline"} <= set(registry.names())
    assert registry.default_name() == "gemini"
    assert registry.get_config("gemini").model_default == "gemini-2.5-pro"


async def test_evicted_clients_are_closed():
    closed: list[str] = []

    class Closing(ScriptedProvider):
        def __init__(self, key):
            super().__init__()
            self.key = key

        async def aclose(self):
            closed.append(self.key)

    class Registry(ProviderRegistry):
        def _build(self, cfg, key):
            return Closing(key)

    import asyncio

    registry = Registry(
        [ProviderConfig(name="p", kind="openai", base_url="http://x")], settings(), cache_size=1
    )
    registry.resolve("p", api_key="k1")
    registry.resolve("p", api_key="k2")
    await asyncio.sleep(0)
    assert closed == ["k1"]
