"""The %idee_agent magic in a real IPython shell."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from idee_notebook_agent.notebook import mapchat as mapchat_module
from idee_notebook_agent.notebook.magic import parse_magic
from idee_notebook_agent.notebook.mapchat import MapChat, current_mapchat

ZOOM = {"name": "zoomTo", "args": {"lat": 41.3874, "lon": 2.1686, "zoom": 11}}


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "idee_notebook_agent")
    yield ip
    ip.run_line_magic("unload_ext", "idee_notebook_agent")


@pytest.fixture(autouse=True)
def no_current_chat() -> Iterator[None]:
    mapchat_module._set_current(None)
    yield
    mapchat_module._set_current(None)


def test_parse_options_and_text() -> None:
    args = parse_magic("--provider openai --model=gpt-4o-mini --new Llévame a Toledo")
    assert (args.provider, args.model, args.new, args.text) == (
        "openai",
        "gpt-4o-mini",
        True,
        "Llévame a Toledo",
    )
    assert parse_magic('--provider "mi proveedor" hola').provider == "mi proveedor"
    assert parse_magic("-- --new no es una opción").text == "--new no es una opción"
    assert parse_magic("l'Hospitalet de Llobregat").text == "l'Hospitalet de Llobregat"
    cell = parse_magic("--new", "Carga la capa\nIGNBaseGris\n")
    assert cell.new and cell.text == "Carga la capa\nIGNBaseGris"
    with pytest.raises(ValueError, match="--modelo"):
        parse_magic("--modelo x hola")
    with pytest.raises(ValueError, match="celda"):
        parse_magic("hola", "y adiós")


def test_line_magic_streams_into_the_cell_and_acts_on_the_latest_mapchat(
    shell: InteractiveShell, make_agent, closing, capsys: pytest.CaptureFixture[str]
) -> None:
    agent, provider = make_agent([[ZOOM], ["Estás en Barcelona."]])
    mc = closing(MapChat(agent=agent, provider="scripted"))
    assert current_mapchat() is mc
    shell.run_line_magic("idee_agent", "Llévame a Barcelona")
    out = capsys.readouterr().out
    assert "🔧 zoomTo" in out and "✓" in out and "Estás en Barcelona." in out
    assert mc.map.center == [41.3874, 2.1686]
    # the chat panel shows the same turn
    assert [i["kind"] for i in mc.chat.messages] == ["user", "assistant", "assistant"]


def test_cell_magic_with_new_conversation_and_model(
    shell: InteractiveShell, make_agent, closing, capsys: pytest.CaptureFixture[str]
) -> None:
    agent, provider = make_agent([["Primera."], ["Segunda."]])
    mc = closing(MapChat(agent=agent, provider="scripted"))
    shell.run_line_magic("idee_agent", "hola")
    first = mc.chat.conversation_id
    shell.run_cell_magic("idee_agent", "--new --model modelo-x", "¿Qué capas hay?\n")
    out = capsys.readouterr().out
    assert "Segunda." in out
    assert mc.chat.conversation_id != first
    assert provider.requests[-1].model == "modelo-x"
    assert len(mc.chat.conversations) == 2


def test_errors_are_printed_not_raised(
    shell: InteractiveShell, make_agent, closing, capsys: pytest.CaptureFixture[str]
) -> None:
    agent, _ = make_agent([["no debería verse"]])
    closing(MapChat(agent=agent, provider="scripted"))
    shell.run_line_magic("idee_agent", "--provider no-existe hola")
    out = capsys.readouterr().out
    assert "⚠" in out and "no-existe" in out
    shell.run_line_magic("idee_agent", "--raro hola")
    err = capsys.readouterr().err
    assert "Opción desconocida" in err


def test_without_a_mapchat_the_magic_creates_one(
    shell: InteractiveShell, settings: Any, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    for var in ("OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY", "LLM_PROVIDER"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("IDEE_BASEMAP_URL", "http://127.0.0.1:9/{z}/{x}/{y}.png")
    monkeypatch.setenv("IDEE_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("IDEE_CACHE_DIR", str(settings.cache_dir))
    from idee_notebook_agent.config import reset_settings

    reset_settings()
    try:
        shell.run_line_magic("idee_agent", "Hola")
        created = current_mapchat()
        assert created is not None
        assert created.map.layers[0].url == "http://127.0.0.1:9/{z}/{x}/{y}.png"
        out = capsys.readouterr().out
        assert out.strip()  # the offline provider answered something readable
        created.close()
        assert current_mapchat() is None
    finally:
        reset_settings()


def test_a_question_mark_line_reaches_the_agent_not_ipython_help(
    shell: InteractiveShell, make_agent, closing, capsys: pytest.CaptureFixture[str]
) -> None:
    agent, provider = make_agent([["Hay una capa."]])
    closing(MapChat(agent=agent, provider="scripted"))
    shell.run_cell("%idee_agent ¿Qué capas hay en el mapa?", store_history=False)
    out = capsys.readouterr().out
    assert "Hay una capa." in out and "not found" not in out
    assert provider.requests[-1].messages[-1].text == "¿Qué capas hay en el mapa?"
