"""Every user notebook runs top to bottom offline with no error output, does what it teaches
(checked against the loopback fakes it used), and is committed without outputs."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import nbformat
import pytest

from tests.fakes.openai_server import FakeToolCall, OpenAIReply
from tests.notebooks.harness import (
    EXPECTED,
    NOTEBOOKS,
    WIDGET_MIME,
    Executed,
    Fakes,
    notebook_names,
)

MADRID_TOLEDO = {"lat1": 40.4168, "lon1": -3.7038, "lat2": 39.8628, "lon2": -4.0273}


def test_the_six_notebooks_of_the_guide_exist() -> None:
    assert set(EXPECTED) <= set(notebook_names())


@pytest.mark.parametrize("name", notebook_names())
def test_notebook_is_committed_clean(name: str) -> None:
    """Outputs cleared, python3 kernelspec, Spanish first with English notes, a Binder link."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
    assert "widgets" not in nb.metadata
    assert nb.metadata["kernelspec"]["name"] == "python3"
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# ")
    assert f"urlpath=lab/tree/notebooks/{name}" in first.source
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "EN:" in markdown
    assert re.search(r"[áéíóúñ¿]", first.source), "the text starts in Spanish"
    assert "127.0.0.1" not in "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for target in re.findall(r"\]\(([^)#\s]+)\)", markdown):
        if "://" not in target:
            assert (NOTEBOOKS / target).exists(), f"{name}: broken link {target}"


# ----------------------------------------------------------------------------- per notebook
def check_quickstart(run: Executed, fakes: Fakes, before: dict[str, int]) -> None:
    text = run.text()
    assert run.count(WIDGET_MIME) >= 1  # the MapChat was displayed
    assert "IGNBaseGris" in text  # seed prompt 1: the catalog layer was added
    assert "municipio de Madrid" in text  # seed prompt 2: boundary drawn and fitted
    found = re.search(r"He detectado (\d+) piscinas", text)  # seed prompt 3
    assert found and int(found.group(1)) > 0, text[-2000:]
    assert "pools" in text and "opencv" in text  # chat.detections, the GeoDataFrame
    assert "🔧 listActiveLayers" in text  # the magic streamed the tool call into the cell
    assert "getCurrentZoom" in text  # the cell magic too
    for layer in ("IGNBase-gris", "Municipio de Madrid", "Piscinas detectadas"):
        assert layer in text  # the last listActiveLayers shows what the three prompts added
    assert len(fakes.wms.getmap_requests) > before["wms"]  # imagery came from PNOA_WMS_URL
    assert len(fakes.carto.requests) > before["carto"]  # geocoding went to CARTOCIUDAD_URL


def check_layers(run: Executed, fakes: Fakes, before: dict[str, int]) -> None:
    text = run.text()
    assert "IGNBaseGris" in text and "PNOA" in text  # catalog search and resolve
    assert "No encuentro la capa 'piscinas municipales'" in text
    assert "HY.PhysicalWaters.Waterbodies" in text  # IDEE search result, added to the map
    assert "He añadido la capa" in text  # ... and through the chat: search, "añade el primero"
    assert "Ortoimágenes PNOA" in text or "OI.OrthoimageCoverage" in text  # GetCapabilities
    assert "IGNBase-gris" in text and "OI.OrthoimageCoverage" in text  # final layer table
    assert "40.4" in text  # geocode_place answered with Madrid's coordinates
    assert len(fakes.catalog.requests) > before["catalog"]
    assert any(r.get("request", "").lower() == "getcapabilities" for r in fakes.wms.requests)


def check_detection(run: Executed, fakes: Fakes, before: dict[str, int]) -> None:
    import geopandas as gpd

    text = run.text()
    gpkg = run.workdir / "piscinas.gpkg"
    assert gpkg.is_file()
    layers = gpd.list_layers(gpkg)["name"].tolist()
    assert len(layers) == 1 and layers[0].startswith("pools_")
    pools = gpd.read_file(gpkg)
    assert len(pools) > 0 and pools.crs.to_epsg() == 4326
    assert f"→ {len(pools)} piscinas" in text
    assert f"{len(pools)} detecciones" in text  # the run's summary says the same
    assert run.count("image/png") >= 1  # the matplotlib figure
    assert run.count(WIDGET_MIME) >= 1  # the interactive map
    assert "Tejados rojos" in text and "tejados_rojos" in text  # the user's own detector ran
    assert len(fakes.wms.getmap_requests) > before["wms"]


def check_knowledge(run: Executed, fakes: Fakes, before: dict[str, int]) -> None:
    text = run.text()
    report = re.search(r"(\d+) documentos, (\d+) fragmentos, modelo (\S+)", text)
    assert report and int(report.group(1)) == 4 and int(report.group(2)) >= 4
    assert report.group(3) == "fastembed:local/multilingual-e5-small-q4"  # EMBEDDINGS_MODEL_PATH
    sources = re.findall(r"📚 (\S+) \(fragmento \d+\)", text)
    assert sources and sources[0] == "licencia.md", sources  # the chat turn's sources event
    assert "Relevant context from the knowledge base" in text and "scne.es" in text
    assert (run.data_dir / "knowledge").is_dir()  # the index went to IDEE_DATA_DIR
    assert text.rstrip().endswith("[]")  # and the example source was removed at the end


def check_rest(run: Executed, fakes: Fakes, before: dict[str, int]) -> None:
    text = run.text()
    assert "/api/docs" in text
    assert "'name': 'offline'" in text  # GET /providers/
    assert "🔧 zoomToExtent" in text  # the JSON tool loop ran the map call...
    assert "He dibujado el contorno" in text  # ... and got the final answer
    assert "tool_call" in text and "done" in text  # SSE events
    assert "He añadido la capa" in text  # the tool-result after the stream
    assert "('user', 'muestra el municipio de Madrid')" in text  # the stored history
    assert "Servidor parado." in text


def check_providers(run: Executed, fakes: Fakes, before: dict[str, int]) -> None:
    text = run.text()
    assert "Proveedor por defecto: openai" in text  # OPENAI_BASE_URL made it the default
    for name in ("ollama", "groq", "gemini", "llama-3.3-70b-versatile"):
        assert name in text  # the providers.json registry
    assert "sk-clave" not in text  # keys never shown
    assert "'valid': True" in text  # the key test listed the fake's models
    assert "('distanciaKm', 'mcp:distancias')" in text  # the MCP tool was registered
    assert "67.461" in text  # called directly through the MCP stdio server
    chats = fakes.openai.chat_requests()[before["openai"] :]
    assert len(chats) == 2, "one request with the question, one with the MCP tool's result"
    tools = [t["function"]["name"] for t in chats[0].json["tools"]]
    assert "distanciaKm" in tools and "zoomTo" in tools
    sent = json.dumps(chats[1].json["messages"], ensure_ascii=False)
    assert "67.461" in sent  # the model got the MCP result back
    assert "🔧 distanciaKm" in text and "unos 67 km" in text


def prepare_providers(fakes: Fakes) -> dict[str, str]:
    """The fake model answers the notebook's one question by calling the MCP tool."""
    fakes.openai.queue(
        OpenAIReply(tool_calls=[FakeToolCall("distanciaKm", MADRID_TOLEDO)]),
        OpenAIReply(text="En línea recta hay unos 67 km entre Madrid y Toledo."),
    )
    return {"OPENAI_BASE_URL": fakes.openai.url}


CHECKS: dict[str, Callable[[Executed, Fakes, dict[str, int]], None]] = {
    "01_quickstart.ipynb": check_quickstart,
    "02_layers_and_services.ipynb": check_layers,
    "03_detect_pools.ipynb": check_detection,
    "04_knowledge.ipynb": check_knowledge,
    "05_rest_mode.ipynb": check_rest,
    "06_providers.ipynb": check_providers,
}
PREPARE: dict[str, Callable[[Fakes], dict[str, str]]] = {
    "06_providers.ipynb": prepare_providers,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", notebook_names())
def test_notebook_runs_offline(name: str, run_notebook, fakes: Fakes) -> None:
    before = {
        "wms": len(fakes.wms.getmap_requests),
        "carto": len(fakes.carto.requests),
        "catalog": len(fakes.catalog.requests),
        "openai": len(fakes.openai.chat_requests()),
    }
    extra_env = PREPARE[name](fakes) if name in PREPARE else {}
    run = run_notebook(name, **extra_env)
    assert not run.errors(), "\n\n".join(run.errors())
    assert name in CHECKS, f"add the checks of what {name} teaches"
    CHECKS[name](run, fakes, before)


@pytest.mark.slow
def test_providers_notebook_runs_without_any_model(run_notebook) -> None:
    """What a Binder user without a key sees: no errors, and each cell says what it would do."""
    run = run_notebook("06_providers.ipynb")
    assert not run.errors(), "\n\n".join(run.errors())
    text = run.text()
    assert "Proveedor por defecto: offline" in text
    assert "Proveedor 'openai' no encontrado" in text  # the key test, without OpenAI configured
    assert "('distanciaKm', 'mcp:distancias')" in text and "67.461" in text  # MCP needs no model
    assert "Sin modelo configurado" in text and "planificador sin conexión" in text
