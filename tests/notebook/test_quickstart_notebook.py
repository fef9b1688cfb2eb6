"""notebooks/01_quickstart.ipynb runs top to bottom offline (nbclient) and is saved clean."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01_quickstart.ipynb"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

pytestmark = pytest.mark.slow


def test_quickstart_is_committed_without_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    assert "widgets" not in nb.metadata


def test_quickstart_runs_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nbclient import NotebookClient

    for name in ("OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY", "LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IDEE_BASEMAP_URL", "http://127.0.0.1:9/{z}/{x}/{y}.png")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("IDEE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("IDEE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(NOTEBOOK.parents[1]), os.environ.get("PYTHONPATH", "")]))  # fmt: skip
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any(WIDGET_MIME in o.get("data", {}) for o in outputs)  # the MapChat was displayed
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert text.strip()  # the magic streamed an answer into the cell
    plain = " ".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "'name': 'basemap'" in plain  # IDEE_BASEMAP_URL replaced the IGN base map URL
    assert "Empty GeoDataFrame" in plain  # chat.detections, no detection run yet
