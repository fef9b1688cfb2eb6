"""``test_api_key``: the REST ``/test-key/`` answers (CONTRACT 3.2) through the real SDKs."""

from __future__ import annotations

import logging

import pytest
from pydantic import SecretStr

from idee_notebook_agent.llm.keytest import test_api_key as check_key
from idee_notebook_agent.llm.registry import ProviderConfig, ProviderRegistry
from tests.fakes.gemini_server import FakeGeminiServer
from tests.fakes.openai_server import FakeOpenAIServer
from tests.llm.helpers import make_settings


def _registry(openai_url: str, gemini_url: str) -> ProviderRegistry:
    return ProviderRegistry(
        [
            ProviderConfig(
                name="Groq",
                kind="openai",
                base_url=openai_url,
                api_key=SecretStr("server-key"),
                models={"Llama": "fake-model"},
            ),
            ProviderConfig(name="gemini", kind="gemini", base_url=gemini_url),
            ProviderConfig(name="offline", kind="offline"),
        ],
        make_settings(),
    )


async def test_valid_openai_compatible_key_lists_sorted_models(
    openai_fake: FakeOpenAIServer, gemini_fake: FakeGeminiServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    openai_fake.valid_keys = {"gsk-user"}
    openai_fake.models = ["zeta", "alpha", "mid", "alpha"]
    registry = _registry(openai_fake.url, gemini_fake.url)

    answer = await check_key(registry, "groq", "  gsk-user  ")

    assert answer == {"valid": True, "provider": "Groq", "models": ["alpha", "mid", "zeta"]}
    assert openai_fake.requests[-1].path == "/v1/models"
    assert openai_fake.bearer_keys() == ["gsk-user"]  # trimmed, used, and only once
    assert registry.cache_info()["size"] == 0  # the tested key never enters the client cache
    assert "gsk-user" not in caplog.text


async def test_rejected_openai_key(
    openai_fake: FakeOpenAIServer, gemini_fake: FakeGeminiServer
) -> None:
    openai_fake.valid_keys = {"good"}
    answer = await check_key(_registry(openai_fake.url, gemini_fake.url), "Groq", "bad")
    assert answer == {"valid": False, "error": "HTTP 401: API key rechazada para 'Groq'"}
    assert len(openai_fake.requests) == 1  # no retries for a key test


async def test_gemini_key_valid_and_invalid(
    openai_fake: FakeOpenAIServer, gemini_fake: FakeGeminiServer
) -> None:
    gemini_fake.valid_keys = {"g-good"}
    registry = _registry(openai_fake.url, gemini_fake.url)

    good = await check_key(registry, "gemini", "g-good")
    assert good == {
        "valid": True,
        "provider": "gemini",
        "models": ["gemini-2.5-flash", "gemini-2.5-pro", "gemini-3-pro-preview"],
    }
    bad = await check_key(registry, "gemini", "g-bad")
    assert bad == {"valid": False, "error": "HTTP 400: API key rechazada para 'gemini'"}
    assert gemini_fake.api_keys() == ["g-good", "g-bad"]


async def test_missing_fields_and_unknown_provider(
    openai_fake: FakeOpenAIServer, gemini_fake: FakeGeminiServer
) -> None:
    registry = _registry(openai_fake.url, gemini_fake.url)
    assert await check_key(registry, "groq", "  ") == {
        "valid": False,
        "error": "API key es requerida",
    }
    assert await check_key(registry, "", "k") == {
        "valid": False,
        "error": "Nombre del proveedor es requerido",
    }
    assert await check_key(registry, "nope", "k") == {
        "valid": False,
        "error": "Proveedor 'nope' no encontrado. Disponibles: Groq, gemini, offline",
    }
    offline = await check_key(registry, "offline", "k")
    assert offline["valid"] is False and "offline" in offline["error"]
    assert openai_fake.requests == [] and gemini_fake.requests == []


async def test_unreachable_endpoint_is_reported_not_raised() -> None:
    registry = _registry("http://127.0.0.1:9/v1", "http://127.0.0.1:9")
    answer = await check_key(registry, "groq", "k-secret")
    assert answer["valid"] is False
    assert "No se pudo conectar" in answer["error"] and "k-secret" not in answer["error"]
