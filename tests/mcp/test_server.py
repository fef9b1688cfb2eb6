"""Our own MCP server, tested with the SDK's client over streamable HTTP and over stdio."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from idee_notebook_agent.config import Settings
from idee_notebook_agent.mcp.server import CATALOG_TOOL, DEFAULT_TOOLS, IdeeMCPServer
from idee_notebook_agent.toolbox.specs import ToolSpec
from tests.fakes.idee_mcp_stdio import extra_registry
from tests.fakes.mcp_server import serve_asgi

REPO = Path(__file__).resolve().parents[2]
OUR_TOOLS = [*DEFAULT_TOOLS, CATALOG_TOOL]


@pytest.fixture
def registry(tmp_path):
    return extra_registry(Settings(data_dir=tmp_path / "data"), tmp_path)


@pytest.fixture
def our_http_url(registry) -> Iterator[str]:
    """``IdeeMCPServer.http_app()`` served by uvicorn on 127.0.0.1 in a background thread."""
    with serve_asgi(IdeeMCPServer(registry).http_app()) as base:
        yield base + "/mcp"


def assert_our_tools(names: list[str]) -> None:
    """The five built-in server tools first, the catalog lookup, and never a map tool."""
    assert names[: len(DEFAULT_TOOLS)] == list(DEFAULT_TOOLS)
    assert names[-1] == CATALOG_TOOL
    assert not {"zoomTo", "addLayer", "getMapExtent"} & set(names)


def text_json(result) -> dict:
    return json.loads(result.content[0].text)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_lists_our_server_tools_with_their_json_schemas(our_http_url, registry, mode):
    async with Client(our_http_url, mode=mode) as client:
        listed = (await client.list_tools()).tools
        assert client.server_info is not None
        assert client.server_info.name == "idee-notebook-agent"

    names = [t.name for t in listed]
    assert names[: len(DEFAULT_TOOLS)] == list(DEFAULT_TOOLS)
    assert set(names) == {*OUR_TOOLS, "countThings"}
    assert "zoomTo" not in names and "addLayer" not in names  # map tools need a map
    schemas = {t.name: t.input_schema for t in listed}
    assert schemas["geocodePlace"] == registry.specs["geocodePlace"].parameters
    assert schemas[CATALOG_TOOL]["required"] == ["name"]


async def test_runs_a_registry_executor_and_returns_json_and_drawn_layers(our_http_url):
    async with Client(our_http_url) as client:
        result = await client.call_tool("countThings", {"items": ["a", "b"], "draw": True})

    assert result.is_error is False
    assert result.structured_content == {"success": True, "count": 2, "first": "a"}
    assert text_json(result) == result.structured_content
    (layer,) = [c for c in result.content if c.type == "resource"]
    assert layer.resource.mime_type == "application/geo+json"
    assert "Puntos-contados" in str(layer.resource.uri)
    collection = json.loads(layer.resource.text)
    assert collection["type"] == "FeatureCollection"
    assert collection["features"][0]["geometry"]["coordinates"] == [-3.7038, 40.4168]


async def test_invalid_arguments_and_unknown_tools_are_tool_errors(our_http_url):
    async with Client(our_http_url, mode="legacy") as client:
        invalid = await client.call_tool("countThings", {"items": "no es una lista"})
        unknown = await client.call_tool("zoomTo", {"lat": 40, "lon": -3})
        placeholder = await client.call_tool("listDetectors", {})

    assert invalid.is_error is True
    assert "Argumentos no válidos para 'countThings'" in text_json(invalid)["error"]
    assert unknown.is_error is True
    assert "Herramienta desconocida 'zoomTo'" in text_json(unknown)["error"]
    # until the detection module registers its executor, the tool says so (and never crashes)
    body = text_json(placeholder)
    assert placeholder.is_error is (body.get("success") is False)


async def test_catalog_lookup_uses_the_addlayer_catalog_resolution(our_http_url):
    async with Client(our_http_url) as client:
        found = await client.call_tool(CATALOG_TOOL, {"name": "IGNBaseGris"})
        ambiguous = await client.call_tool(CATALOG_TOOL, {"name": "IGNBase"})
        missing = await client.call_tool(CATALOG_TOOL, {"name": "Atlantis"})

    assert found.is_error is False
    layer = found.structured_content["layer"]
    assert layer["type"] == "WMTS" and layer["url"] == "https://www.ign.es/wmts/ign-base?"
    assert layer["name"] == "IGNBase-gris" and layer["matrixSet"] == "GoogleMapsCompatible"
    assert ambiguous.is_error is True
    assert [c["id"] for c in text_json(ambiguous)["candidates"]] == ["IGNBaseGris", "IGNBaseTodo"]
    assert missing.is_error is True and "Atlantis" in text_json(missing)["error"]


def test_tools_of_other_mcp_servers_are_not_reexported(registry):
    async def remote(args, ctx):
        return {"success": True}

    registry.add_tool(ToolSpec("remoteThing", origin="mcp:otro"), remote)
    server = IdeeMCPServer(registry)
    assert "remoteThing" not in server.tool_names
    assert "countThings" in server.tool_names
    assert IdeeMCPServer(registry, tools=["geocodePlace"]).tool_names == ["geocodePlace"]


async def test_our_server_over_stdio_runs_the_executor():
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.fakes.idee_mcp_stdio"],
        cwd=str(REPO),
        env={"PYTHONPATH": str(REPO)},
    )
    async with Client(params, read_timeout_seconds=60) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool("countThings", {"items": ["x"]})

    assert "countThings" in names and "geocodePlace" in names
    assert result.is_error is False
    assert result.structured_content == {"success": True, "count": 1, "first": "x"}


async def test_cli_mcp_serve_stdio_offers_our_server_tools():
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "idee_notebook_agent.cli", "mcp", "serve"],
        cwd=str(REPO),
        env={"PYTHONPATH": str(REPO)},
    )
    async with Client(params, read_timeout_seconds=60) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        invalid = await client.call_tool("geocodePlace", {"q": 3})

    assert_our_tools(names)
    assert invalid.is_error is True
    assert "Argumentos no válidos para 'geocodePlace'" in text_json(invalid)["error"]


async def test_cli_mcp_serve_http_on_a_free_port():
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "idee_notebook_agent.cli",
            "mcp",
            "serve",
            "-t",
            "http",
            "--port",
            "0",
        ],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = await asyncio.to_thread(proc.stderr.readline)
        match = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", line)
        assert match, line
        async with Client(match.group(1)) as client:
            names = [t.name for t in (await client.list_tools()).tools]
        assert_our_tools(names)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stderr.close()
