"""Locate the data folders (tools/, skills/, widget_js/) in a wheel or in a source checkout."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def data_path(name: str) -> Path:
    """Folder ``name`` shipped in the wheel (``_data/<name>``), else the repository's copy."""
    packaged = resources.files("idee_notebook_agent") / "_data" / name
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / name
