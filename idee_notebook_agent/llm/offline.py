"""The offline planner: a provider that needs no key and no network model.

It reads the same request as any model (messages, tool specs, map state) and answers with tool
calls and text, so the agent loop, the widget and the server do not know the difference. Requests
are recognised with rules kept as data (``skills/intents/*.yaml``); the plan is replayed against
the tool results of the turn on every call, so the planner keeps no state of its own.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

from ..config import Settings
from ..core.conversation import ToolCall, UserMessage
from ..errors import IdeeAgentError, ProviderError
from .base import ChatRequest, Chunk, TextChunk, ToolCallChunk
from .planner import answers
from .planner.followup import pick, previous_options, selection_step
from .planner.parse import FALLBACK, Step, parse
from .planner.recipes import Env
from .planner.rules import PlannerData, default_folders, load_planner_data
from .planner.runner import Next, advance, last_user_index, turn_results

log = logging.getLogger(__name__)

NO_MODEL_MESSAGE = (
    "No hay ningún modelo de lenguaje configurado, así que respondo con el planificador sin "
    "conexión. " + answers.capabilities("es") + " " + answers.configure("es") + " "
    "(EN: no language model is configured; set OPENAI_API_KEY or GOOGLE_API_KEY, "
    "IDEE_PROVIDERS_FILE, or enter a key in the chat settings.)"
)
"""What the planner answers when it cannot help: what it can do and how to configure a model."""


class OfflinePlanner:
    """A ``ChatProvider`` that plans map tool calls from rules instead of a language model."""

    name = "offline"
    default_model = "planner"

    def __init__(
        self, settings: Settings | None = None, *, intents_dirs: list[Path] | None = None
    ) -> None:
        self.settings = settings
        extra = settings.split_dirs(settings.skills_dirs) if settings is not None else []
        self.folders = list(intents_dirs) if intents_dirs else default_folders(extra)

    def data(self) -> PlannerData:
        return load_planner_data(self.folders)

    def plan(self, request: ChatRequest) -> Next:
        """The next tool calls, or the final text, for this request (pure: no I/O but YAML)."""
        data = self.data()
        messages = list(request.messages)
        index = last_user_index(messages)
        tools = {spec.name for spec in request.tools}
        if index < 0:
            return Next([], NO_MODEL_MESSAGE)
        user = messages[index]
        assert isinstance(user, UserMessage)
        parsed = parse(user.text, data)
        steps = _apply_followup(parsed.steps, user.text, messages, index, data)
        env = Env(parsed.lang, tools, data, request.map_state)
        result = advance(steps, turn_results(messages, index), env)
        if result.text is not None:
            result.text = _close(result.text, steps, parsed.lang)
        return result

    async def stream(self, request: ChatRequest) -> AsyncIterator[Chunk]:
        try:
            result = self.plan(request)
        except IdeeAgentError as exc:
            raise ProviderError(
                f"El planificador sin conexión no pudo cargar sus reglas: {exc}", provider=self.name
            ) from exc
        except Exception as exc:  # a planner bug must not kill the turn or the conversation
            log.exception("Offline planner failed")
            raise ProviderError(
                f"El planificador sin conexión falló ({type(exc).__name__}). Reformula la petición "
                "o configura un modelo de lenguaje.",
                provider=self.name,
            ) from exc
        for call in result.calls:
            yield ToolCallChunk(ToolCall(call.name, dict(call.args)))
        if result.text:
            yield TextChunk(result.text)

    async def list_models(self) -> list[str]:
        return [self.default_model]

    async def aclose(self) -> None:
        return None


def _apply_followup(
    steps: list[Step], text: str, messages: list, index: int, data: PlannerData
) -> list[Step]:
    """Replace the plan by the user's choice when they answer the planner's previous question."""
    if any(step.action not in ("add_layer", FALLBACK, "help") for step in steps):
        return steps
    offered = previous_options(messages, index)
    if offered is None:
        return steps
    kind, options = offered
    choice = pick(text, options, data)
    if choice is None:
        return steps
    return [selection_step(kind, options[choice], text)]


def _close(text: str, steps: list[Step], lang: str) -> str:
    """Add what the planner can do and how to configure a model when it could not help."""
    actions = {step.action for step in steps}
    if not text.strip():
        text = "Hecho." if lang == "es" else "Done."
    if actions <= {FALLBACK}:
        return "\n".join([text, answers.capabilities(lang), answers.configure(lang)])
    if FALLBACK in actions:
        return "\n".join([text, answers.configure(lang)])
    if actions <= {"help"} and any(s.params.get("kind") != "thanks" for s in steps):
        return "\n".join([text, answers.configure(lang)])
    return text
