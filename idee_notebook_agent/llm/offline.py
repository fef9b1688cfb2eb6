"""The offline planner: a provider that needs no key and no network model.

Placeholder until the planner issue lands: it says plainly that no model is configured and how
to configure one, and never makes up a tool call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..config import Settings
from .base import ChatRequest, Chunk, TextChunk

NO_MODEL_MESSAGE = (
    "No hay ningún modelo de lenguaje configurado. Define OPENAI_API_KEY o GOOGLE_API_KEY "
    "(o un fichero providers.json con IDEE_PROVIDERS_FILE), o escribe tu clave en los ajustes del chat. "
    "(EN: no language model is configured; set OPENAI_API_KEY or GOOGLE_API_KEY.)"
)


class OfflinePlanner:
    name = "offline"
    default_model = "planner"

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        yield TextChunk(NO_MODEL_MESSAGE)

    async def list_models(self) -> list[str]:
        return [self.default_model]

    async def aclose(self) -> None:
        return None
