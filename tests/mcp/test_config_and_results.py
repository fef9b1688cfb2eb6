"""``mcp_servers.json`` parsing and the MCP result → model JSON conversion."""

from __future__ import annotations

import base64
import json

import pytest

from idee_notebook_agent.errors import ConfigurationError, ToolError
from idee_notebook_agent.mcp.client import local_tool_name, normalise_schema
from idee_notebook_agent.mcp.config import load_mcp_config, parse_mcp_config
from idee_notebook_agent.mcp.results import MAX_TEXT_CHARS, to_model_result


def test_seed_array_loads_unchanged_with_defaults(tmp_path):
    path = tmp_path / "mcp_servers.json"
    path.write_text(
        json.dumps([{"name": "tiempo", "url": "http://localhost:8001", "timeout": 15}]),
        encoding="utf-8",
    )
    (cfg,) = load_mcp_config(path)
    assert (cfg.name, cfg.url, cfg.timeout, cfg.transport) == (
        "tiempo",
        "http://localhost:8001",
        15.0,
        "auto",
    )
    (default,) = parse_mcp_config([{"name": "x", "url": "https://example.org/mcp"}])
    assert default.timeout == 30.0


def test_stdio_and_desktop_assistant_forms(monkeypatch):
    monkeypatch.setenv("MCP_TEST_TOKEN", "s3cret")
    configs = parse_mcp_config(
        {
            "mcpServers": {
                "local": {
                    "command": "python",
                    "args": ["-m", "srv"],
                    "env": {"K": "$MCP_TEST_TOKEN"},
                },
                "remoto": {
                    "url": "https://example.org/mcp",
                    "type": "streamable-http",
                    "headers": {"Authorization": "Bearer ${MCP_TEST_TOKEN}"},
                },
                "apagado": {"url": "https://example.org/off", "enabled": False},
            }
        }
    )
    local, remote = configs
    assert local.transport == "stdio" and local.args == ["-m", "srv"]
    assert local.env == {"K": "s3cret"}
    assert local.target == "python -m srv"
    assert remote.transport == "http"
    assert remote.headers == {"Authorization": "Bearer s3cret"}
    assert "s3cret" not in remote.target


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ({"servers": []}, "se esperaba una lista"),
        ([{"url": "http://x"}], "falta 'name'"),
        ([{"name": "a"}], "necesita 'url'"),
        ([{"name": "a", "url": "ftp://x"}], "http:// o https://"),
        ([{"name": "a", "url": "http://x", "timeout": 0}], "'timeout'"),
        ([{"name": "a", "url": "http://x", "transport": "carrier-pigeon"}], "desconocido"),
        ([{"name": "a", "transport": "stdio"}], "no tiene 'command'"),
        ([{"name": "a", "url": "http://x"}, {"name": "a", "url": "http://y"}], "dos veces"),
    ],
)
def test_bad_entries_get_a_clear_message(entries, message):
    with pytest.raises(ConfigurationError, match=message):
        parse_mcp_config(entries)


def test_missing_or_malformed_file(tmp_path):
    with pytest.raises(ConfigurationError, match="No existe"):
        load_mcp_config(tmp_path / "nada.json")
    bad = tmp_path / "bad.json"
    bad.write_text("[{", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="no es JSON válido"):
        load_mcp_config(bad)


def test_tool_names_and_schemas_are_made_safe_for_the_model():
    assert local_tool_name("weather.get/today") == "weather_get_today"
    assert len(local_tool_name("x" * 100)) == 64
    assert normalise_schema(None) == {"type": "object", "properties": {}}
    assert normalise_schema({"properties": {"a": {"type": "string"}}})["type"] == "object"
    assert normalise_schema({"type": "string"}) is None
    assert normalise_schema({"type": "object", "properties": {"a": {"type": 12}}}) is None


def test_result_conversion_covers_every_content_kind():
    png = base64.b64encode(b"\x89PNG" + b"0" * 2044).decode()
    result = to_model_result(
        "srv",
        "t",
        {
            "content": [
                {"type": "text", "text": "línea 1"},
                {"type": "image", "data": png, "mimeType": "image/png"},
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "https://x/y.pdf", "name": "informe"},
                {"type": "resource", "resource": {"uri": "mem://a", "text": "texto embebido"}},
                {"type": "resource", "resource": {"uri": "mem://b", "blob": "AAAA"}},
            ]
        },
    )
    assert result["text"].splitlines() == [
        "línea 1",
        "[recurso: informe <https://x/y.pdf>]",
        "texto embebido",
        "[recurso mem://b (application/octet-stream, 3 B)]",
    ]
    assert [m["summary"] for m in result["media"]] == [
        "[imagen image/png, 2.0 KB]",
        "[audio audio/wav, 3 B]",
    ]


def test_json_text_becomes_data_and_long_text_is_cut():
    assert to_model_result("s", "t", {"content": [{"type": "text", "text": '{"a": [1, 2]}'}]})[
        "data"
    ] == {"a": [1, 2]}
    long = to_model_result(
        "s", "t", {"content": [{"type": "text", "text": "x" * (MAX_TEXT_CHARS + 5)}]}
    )
    assert long["truncated"] is True and long["text"].endswith("(recortado)")
    # the seed's results without content are passed as JSON
    assert to_model_result("s", "t", {"value": 3})["data"] == {"value": 3}


def test_is_error_becomes_a_tool_error_naming_the_server():
    with pytest.raises(
        ToolError, match="servidor MCP 'srv' devolvió un error: no hay datos"
    ) as info:
        to_model_result(
            "srv", "t", {"content": [{"type": "text", "text": "no hay datos"}], "isError": True}
        )
    assert info.value.data == {"server": "srv"}
