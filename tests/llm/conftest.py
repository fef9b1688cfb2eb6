"""Fixtures for the provider tests: the two loopback fakes and a clean environment."""

from __future__ import annotations

import pytest

from tests.fakes.gemini_server import gemini_fake  # noqa: F401  (fixture)
from tests.fakes.openai_server import openai_fake  # noqa: F401  (fixture)

_ENV = (
    "LLM_PROVIDER",
    "LLM_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "GEMINI_BASE_URL",
    "IDEE_PROVIDERS_FILE",
    "PROVIDERS_CONFIG_PATH",
    "MCP_SERVERS_PATH",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys or providers of the developer's shell must not leak into these tests."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
