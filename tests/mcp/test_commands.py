"""``idee-agent mcp list`` and the argument checks of ``idee-agent mcp serve``."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from idee_notebook_agent.mcp.commands import register
from tests.fakes.mcp_server import free_port


@pytest.fixture
def app() -> typer.Typer:
    """A fresh ``idee-agent``-like app with only the ``mcp`` group registered."""
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """idee-agent (prueba)."""

    register(app)
    return app


def test_mcp_list_shows_servers_tools_and_collisions(app, http_server, tmp_path):
    config = tmp_path / "mcp_servers.json"
    config.write_text(json.dumps([{"name": "fake-http", "url": http_server.url}]), "utf-8")

    result = CliRunner().invoke(app, ["mcp", "list", "--config", str(config)])

    assert result.exit_code == 0, result.output
    assert "fake-http [http]" in result.output and "conectado, 7 herramientas" in result.output
    assert "echo" in result.output and "Devuelve el texto recibido." in result.output
    zoom = next(line for line in result.output.splitlines() if line.strip().startswith("zoomTo"))
    assert "omitida: choca con" in zoom and "zoomTo.json" in zoom


def test_mcp_list_json_and_a_down_server_exit_code(app, http_server, tmp_path):
    config = tmp_path / "mcp_servers.json"
    down = f"http://127.0.0.1:{free_port()}/mcp"
    config.write_text(
        json.dumps(
            [
                {"name": "fake-http", "url": http_server.url},
                {"name": "apagado", "url": down, "timeout": 5},
            ]
        ),
        "utf-8",
    )

    result = CliRunner().invoke(app, ["mcp", "list", "--config", str(config), "--json"])

    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert [(s["name"], s["status"]) for s in data] == [
        ("fake-http", "connected"),
        ("apagado", "down"),
    ]
    assert data[1]["tools"] == [] and data[1]["error"]


def test_mcp_list_without_configuration_says_what_to_do(app, monkeypatch):
    monkeypatch.delenv("MCP_SERVERS_PATH", raising=False)
    from idee_notebook_agent.config import reset_settings

    reset_settings()
    try:
        result = CliRunner().invoke(app, ["mcp", "list"])
    finally:
        reset_settings()
    assert result.exit_code == 2
    assert "MCP_SERVERS_PATH" in result.output


def test_mcp_serve_refuses_map_tools_and_bad_transports(app):
    runner = CliRunner()
    result = runner.invoke(app, ["mcp", "serve", "--tool", "zoomTo"])
    assert result.exit_code == 2 and "zoomTo" in result.output
    assert "no son herramientas de servidor" in result.output
    result = runner.invoke(app, ["mcp", "serve", "--transport", "carrier-pigeon"])
    assert result.exit_code == 2 and "stdio o http" in result.output
