"""Run the user notebooks the way a user would, but offline.

Loopback fakes stand in for the real services and reach the kernel through the environment
variables a user would set (``CARTOCIUDAD_URL``, ``PNOA_WMS_URL``...). Each notebook runs in a
fresh kernel, on an in-memory copy, from ``<tmp>/notebooks`` with ``<tmp>/docs`` linked to the
repository's docs (the layout the notebooks expect), so nothing is written back into the repo.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
SHARED = REPO.parent / "shared"  # CI lays shared/ beside the repository clone
POOLS_DIR = SHARED / "data" / "pools"
E5_MODEL = SHARED / "models" / "multilingual-e5-small-q4"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
EXPECTED = (
    "01_quickstart.ipynb",
    "02_layers_and_services.ipynb",
    "03_detect_pools.ipynb",
    "04_knowledge.ipynb",
    "05_rest_mode.ipynb",
    "06_providers.ipynb",
)

# Variables that would make a kernel use a real model, a user's files or other configuration.
CLEARED = (
    "LLM_PROVIDER",
    "LLM_MODEL",
    "OPENAI_BASE_URL",
    "GEMINI_BASE_URL",
    "IDEE_PROVIDERS_FILE",
    "PROVIDERS_CONFIG_PATH",
    "MCP_SERVERS_PATH",
    "DATABASE_URL",
    "EMBEDDINGS_MODEL",
    "IDEE_TOOLS_DIRS",
    "IDEE_SKILLS_DIRS",
    "IDEE_SKILLS",
    "IDEE_POOL_MODEL_URL",
    "IDEE_LANGUAGE",
)


def notebook_names() -> list[str]:
    """The user notebooks in the repository (``NN_name.ipynb``)."""
    return sorted(p.name for p in NOTEBOOKS.glob("*.ipynb") if re.match(r"\d\d_", p.name))


@dataclass
class Fakes:
    """The running loopback services."""

    carto: Any
    catalog: Any
    wms: Any
    openai: Any

    def env(self) -> dict[str, str]:
        """What points a kernel at the fakes (the variables of ``config.Settings``)."""
        return {
            "CARTOCIUDAD_URL": self.carto.url,
            "IDEE_CATALOG_URL": self.catalog.url,
            "PNOA_WMS_URL": self.wms.url,
            "IDEE_ALLOW_HOSTS": "127.0.0.1",
            # no browser runs here: the tile URL only has to stay on loopback (nothing loads it)
            "IDEE_BASEMAP_URL": "http://127.0.0.1:9/{z}/{x}/{y}.png",
            "EMBEDDINGS_PROVIDER": "fastembed",
            "EMBEDDINGS_MODEL_PATH": str(E5_MODEL),
        }


@dataclass
class Executed:
    """A notebook after its run: the executed copy and the folders it used."""

    nb: Any
    workdir: Path
    data_dir: Path

    def outputs(self) -> list[Any]:
        return [o for c in self.nb.cells if c.cell_type == "code" for o in c.outputs]

    def errors(self) -> list[str]:
        """Error outputs, and tracebacks printed to a stream (a logged exception counts too)."""
        found = []
        for out in self.outputs():
            if out.output_type == "error":
                found.append(f"{out.ename}: {out.evalue}")
            elif out.output_type == "stream" and "Traceback (most recent call last)" in out.text:
                found.append(out.text[-1500:])
        return found

    def text(self) -> str:
        """Everything a reader sees as text: streams, plain and HTML results."""
        parts = []
        for out in self.outputs():
            if out.output_type == "stream":
                parts.append(out.text)
            else:
                data = out.get("data", {})
                parts.append(str(data.get("text/plain", "")))
                parts.append(str(data.get("text/html", "")))
        return "\n".join(parts)

    def count(self, mime: str) -> int:
        return sum(1 for o in self.outputs() if mime in o.get("data", {}))


def kernel_env(tmp_path: Path, fakes: Fakes, extra: dict[str, str]) -> dict[str, str]:
    """The kernel's environment: fakes, private folders, and nothing of the user's."""
    return {
        **fakes.env(),
        "IDEE_DATA_DIR": str(tmp_path / "data"),
        "IDEE_CACHE_DIR": str(tmp_path / "cache"),
        "IDEE_MODELS_DIR": str(tmp_path / "models"),  # no YOLO model installed: the OpenCV path
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "MPLCONFIGDIR": str(tmp_path / "mpl"),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
        **extra,
    }


def execute(name: str, tmp_path: Path, timeout: int = 240) -> Executed:
    """Execute a copy of ``notebooks/<name>`` in a fresh kernel (the environment is the caller's)."""
    from nbclient import NotebookClient

    workdir = tmp_path / "notebooks"
    workdir.mkdir()
    (tmp_path / "docs").symlink_to(REPO / "docs", target_is_directory=True)
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=True,  # run every cell, so a failure report lists all broken cells
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute()
    return Executed(nb, workdir, tmp_path / "data")
