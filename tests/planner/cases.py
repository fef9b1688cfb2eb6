"""Load the phrasing cases and score the offline planner on them (used by tests and the benchmark)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from idee_notebook_agent.core.conversation import ToolCall
from idee_notebook_agent.llm.offline import OfflinePlanner
from tests.fakes.planner_world import World, all_specs, drive_sync

DATA = Path(__file__).parent / "data"


def load_cases(name: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load((DATA / name).read_text(encoding="utf-8"))["cases"])


def arg_matches(expected: Any, actual: Any) -> bool:
    if isinstance(expected, list):
        return any(arg_matches(e, actual) for e in expected)
    if isinstance(expected, dict) and isinstance(actual, dict):
        return all(k in actual and arg_matches(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, str) and isinstance(actual, str):
        return expected.casefold() == actual.casefold()
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return abs(expected - actual) < 1e-6
    return expected == actual


@dataclass
class Outcome:
    case: dict[str, Any]
    calls: list[ToolCall]
    text: str
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def check(case: dict[str, Any], calls: list[ToolCall], text: str) -> list[str]:
    """What differs between the expected and the actual calls (empty when they match)."""
    problems: list[str] = []
    validators = {s.name: Draft202012Validator(s.parameters) for s in all_specs()}
    for call in calls:
        errors = (
            list(validators[call.name].iter_errors(call.args)) if call.name in validators else []
        )
        if call.name not in validators or errors:
            problems.append(f"invalid call {call.name}({call.args})")
    expected = case.get("calls") or []
    if len(expected) != len(calls):
        problems.append(f"{len(calls)} calls instead of {len(expected)}")
    for (name, args), call in zip(expected, calls, strict=False):  # lengths checked above
        if call.name != name:
            problems.append(f"{call.name} instead of {name}")
        elif not arg_matches(args or {}, call.args):
            problems.append(f"{name} args {call.args} do not match {args}")
    if not text.strip():
        problems.append("no final text")
    return problems


def evaluate(cases: list[dict[str, Any]], planner: OfflinePlanner | None = None) -> list[Outcome]:
    planner = planner or OfflinePlanner()
    results = []
    for case in cases:
        world = World.from_case(case.get("world"))
        try:
            turn = drive_sync(planner, case["text"], world)
        except AssertionError as exc:
            results.append(Outcome(case, [], "", [str(exc)]))
            continue
        results.append(Outcome(case, turn.calls, turn.text, check(case, turn.calls, turn.text)))
    return results


def accuracy(outcomes: list[Outcome]) -> float:
    return sum(o.ok for o in outcomes) / len(outcomes) if outcomes else 0.0


def report(outcomes: list[Outcome]) -> str:
    lines = []
    for o in outcomes:
        if not o.ok:
            got = [f"{c.name}({c.args})" for c in o.calls]
            lines.append(f"- {o.case['text']!r}: {'; '.join(o.problems)} — got {got}")
    return "\n".join(lines)
