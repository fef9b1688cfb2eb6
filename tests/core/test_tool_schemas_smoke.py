"""Every map tool runs with arguments generated from its own schema (no spec can drift)."""

from __future__ import annotations

import json
import random

import pytest

from idee_notebook_agent.config import Settings
from idee_notebook_agent.core.conversation import ToolCall
from idee_notebook_agent.core.headless_map import HeadlessMapPort
from idee_notebook_agent.core.mapport import MAP_TOOLS
from idee_notebook_agent.toolbox.registry import ToolRegistry

from .schema_args import example


@pytest.mark.parametrize("name", MAP_TOOLS)
@pytest.mark.parametrize("seed", range(6))
def test_map_tool_accepts_schema_valid_arguments(name, seed):
    registry = ToolRegistry.load(Settings(), include_builtin_executors=False)
    spec = registry.specs[name]
    args = example(spec.parameters, random.Random(seed), full=seed % 2 == 0)
    assert registry.check_call(ToolCall(name, args)) is None, args
    port = HeadlessMapPort()
    result = port.call(name, args)
    json.dumps(result)  # always JSON the model can read
    if isinstance(result, dict) and result.get("success") is False:
        assert result["error"]  # a failure always says why
