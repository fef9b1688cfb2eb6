from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from idee_notebook_agent.config import Settings
from idee_notebook_agent.core.conversation import ToolCall
from idee_notebook_agent.core.mapport import MAP_TOOLS
from idee_notebook_agent.errors import ConfigurationError
from idee_notebook_agent.resources import data_path
from idee_notebook_agent.toolbox.registry import SERVER_SIDE_TOOLS, ToolRegistry

SEED_TOOLS = {
    "getMapCenter",
    "getCurrentZoom",
    "listActiveLayers",
    "getMapExtent",
    "addLayer",
    "zoomTo",
    "zoomToExtent",
    "removeLayer",
    "setZoom",
    "fetchWebPage",
    "geocodePlace",
    "searchIdeeService",
    "listDetectors",
    "detectObjects",
}


def test_builtin_specs_skills_and_sides():
    registry = ToolRegistry.load(Settings())
    assert set(registry.specs) == SEED_TOOLS
    assert set(registry.map_tool_names) == set(MAP_TOOLS)
    assert all(registry.is_server_tool(n) for n in SERVER_SIDE_TOOLS)
    assert {s.name for s in registry.skills} >= {
        "navigation",
        "layer_management",
        "object_detection",
    }
    for spec in registry.tool_list():
        Draft202012Validator.check_schema(spec.parameters)
        assert spec.description, spec.name
    add = registry.specs["addLayer"].parameters["properties"]["type"]["enum"]
    assert add == ["WMS", "WMTS", "WFS", "GeoJSON", "KML", "XYZ", "MVT", "TMS", "OGCAPIFeatures"]
    assert registry.specs["detectObjects"].long_running


def write(folder: Path, name: str, data) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(
        json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data), encoding="utf-8"
    )
    return path


def test_extra_folders_add_tools_and_skills_without_python(tmp_path):
    write(
        tmp_path / "t",
        "highlight.json",
        {
            "name": "highlight",
            "description": "Resalta",
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
            },
        },
    )
    write(
        tmp_path / "s",
        "extra.yaml",
        {"name": "extra", "tools": ["highlight"], "prompt": "Usa highlight"},
    )
    registry = ToolRegistry.load(
        Settings(IDEE_TOOLS_DIRS=str(tmp_path / "t"), IDEE_SKILLS_DIRS=str(tmp_path / "s"))
    )
    assert registry.is_map_tool("highlight")
    assert "Usa highlight" in next(s for s in registry.skills if s.name == "extra").prompt_block()
    assert registry.check_call(ToolCall("highlight", {})) is not None
    assert registry.check_call(ToolCall("highlight", {"id": "a"})) is None


def test_seed_format_files_load_unchanged(tmp_path):
    # a classic API-IDEE agent definition (CONTRACT 7.1) and a seed skill
    write(
        tmp_path / "t" / "definitions",
        "addWMSLayer.json",
        {
            "name": "addWMSLayer",
            "description": "Add WMS",
            "parameters": {
                "type": "object",
                "properties": {
                    "url": {"type": "string"},
                    "name": {"type": "string"},
                    "legend": {"type": "string"},
                    "transparent": {"type": "boolean", "default": True},
                },
                "required": ["url", "name"],
            },
        },
    )
    write(tmp_path / "t" / "definitions", "nameless.json", {"description": "skipped"})
    registry = ToolRegistry.load(Settings(IDEE_TOOLS_DIRS=str(tmp_path / "t")))
    assert "addWMSLayer" in registry.specs


@pytest.mark.parametrize(
    ("kind", "setup", "message"),
    [
        ("duplicate", lambda d: write(d / "t", "zoom.json", {"name": "zoomTo"}), "duplicada"),
        (
            "schema",
            lambda d: write(
                d / "t",
                "bad.json",
                {
                    "name": "bad",
                    "parameters": {"type": "object", "properties": {"x": {"type": "nope"}}},
                },
            ),
            "JSON Schema",
        ),
        (
            "skill",
            lambda d: write(d / "s", "bad.yaml", {"name": "bad", "tools": ["ghost"]}),
            "ghost",
        ),
    ],
)
def test_startup_validation_names_the_culprit(tmp_path, kind, setup, message):
    setup(tmp_path)
    (tmp_path / "t").mkdir(exist_ok=True)
    (tmp_path / "s").mkdir(exist_ok=True)
    with pytest.raises(ConfigurationError, match=message):
        ToolRegistry.load(
            Settings(IDEE_TOOLS_DIRS=str(tmp_path / "t"), IDEE_SKILLS_DIRS=str(tmp_path / "s"))
        )


def test_executor_without_spec_is_refused():
    with pytest.raises(ConfigurationError, match="ningún fichero"):
        ToolRegistry.load(Settings(), executors={"ghostTool": lambda a, c: None})


def test_data_folders_are_found():
    for name in ("tools", "skills", "widget_js"):
        assert data_path(name).is_dir(), name
