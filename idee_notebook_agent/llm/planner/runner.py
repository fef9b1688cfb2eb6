"""Replay the plan against this turn's tool results and decide what comes next.

The agent calls the planner again after every round of results. Each recipe is re-run from the
start and fed the recorded results in order; the first call with no recorded result is the next
one to make. When every step has ended, their sentences make the final answer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ...core.conversation import AssistantMessage, Message, ToolResultMessage, UserMessage
from . import answers
from .parse import Step
from .recipes import RECIPES, Call, Env, Outcome, Result

log = logging.getLogger(__name__)


@dataclass
class Next:
    """Either calls to make now, or the final text of the turn."""

    calls: list[Call]
    text: str | None = None


def last_user_index(messages: list[Message]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], UserMessage):
            return i
    return -1


def turn_results(messages: list[Message], start: int) -> list[Result]:
    """Calls made after message ``start`` with their results, in the order they were made."""
    answered = {m.call_id: m for m in messages[start + 1 :] if isinstance(m, ToolResultMessage)}
    history: list[Result] = []
    for message in messages[start + 1 :]:
        if not isinstance(message, AssistantMessage):
            continue
        for call in message.tool_calls:
            result = answered.get(call.id)
            if result is None:
                return history
            history.append(Result(call.name, dict(call.args), result.result, result.success))
    return history


def advance(steps: list[Step], history: list[Result], env: Env) -> Next:
    """The next calls of the plan given what already ran, or the closing text."""
    lines: list[str] = []
    emitted: list[Call] = []
    position = 0
    for step in steps:
        recipe = RECIPES[step.action](step, env)
        try:
            action = next(recipe)
            while True:
                if action.name not in env.tools:
                    action = recipe.send(Result(action.name, action.args, None, False, True))
                    continue
                if position < len(history):
                    done = history[position]
                    if done.name != action.name:
                        log.info("Planner: history diverges (%s != %s)", done.name, action.name)
                        return Next([], answers.compose([*lines, env.t("diverged")]))
                    position += 1
                    action = recipe.send(done)
                    continue
                emitted.append(action)
                if not action.terminal:
                    return Next(emitted)
                break  # the recipe ends after this call: plan the next step in the same round
        except StopIteration as stop:
            outcome: Outcome = stop.value or Outcome()
            lines.extend(outcome.lines)
            if outcome.question:
                if emitted:
                    return Next(emitted)
                return Next([], answers.compose([*lines, outcome.question]))
    if emitted:
        return Next(emitted)
    return Next([], answers.compose(lines))
