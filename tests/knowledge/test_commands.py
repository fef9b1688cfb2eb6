"""``idee-agent index`` and ``idee-agent sources`` (list, search, rm) through the real CLI."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from idee_notebook_agent.config import reset_settings
from idee_notebook_agent.knowledge.commands import guess_type, register
from tests.knowledge.helpers import CORPUS


@pytest.fixture
def cli(tmp_path, model_dir, monkeypatch):
    monkeypatch.setenv("IDEE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("IDEE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("EMBEDDINGS_PROVIDER", "fastembed")
    monkeypatch.setenv("EMBEDDINGS_MODEL_PATH", str(model_dir))
    monkeypatch.delenv("EMBEDDINGS_MODEL", raising=False)
    reset_settings()
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """idee-agent"""

    register(app)
    runner = CliRunner()
    yield lambda *args: runner.invoke(app, list(args))
    reset_settings()


def test_index_list_search_and_remove(cli):
    result = cli("index", str(CORPUS / "docs" / "en"), "--type", "path", "--name", "estilos", "-q")
    assert result.exit_code == 0, result.output
    assert "Fuente 'estilos' indexada" in result.output and "multilingual-e5-small" in result.output

    listing = cli("sources")
    assert listing.exit_code == 0
    assert "estilos" in listing.output and "path" in listing.output
    data = json.loads(cli("sources", "--json").output)
    assert data[0]["name"] == "estilos" and data[0]["chunks"] >= 3

    found = cli("sources", "search", "heatmap blur radius", "-k", "1", "--json")
    assert json.loads(found.output)[0]["title"].endswith("Heatmap")

    removed = cli("sources", "rm", "estilos")
    assert removed.exit_code == 0 and "eliminada" in removed.output
    assert "No hay fuentes indexadas" in cli("sources").output


def test_errors_are_one_clear_line(cli, tmp_path):
    missing = cli("sources", "rm", "nada")
    assert missing.exit_code == 2 and "No hay ninguna fuente llamada 'nada'" in missing.output
    bad = cli("index", str(tmp_path / "no-existe"), "--type", "path", "-q")
    assert bad.exit_code == 2 and "no es una carpeta" in bad.output
    assert "Traceback" not in bad.output


def test_the_source_type_is_guessed(tmp_path):
    assert guess_type("https://github.com/IGN/API-IDEE.git") == "git"
    assert guess_type("https://componentes.idee.es/api-idee/") == "web"
    assert guess_type(str(tmp_path)) == "path"
    (tmp_path / ".git").mkdir()
    assert guess_type(str(tmp_path)) == "git"
