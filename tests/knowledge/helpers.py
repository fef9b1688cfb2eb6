"""Shared helpers of the knowledge tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from idee_notebook_agent.config import Settings

DATA = Path(__file__).parent / "data"
CORPUS = DATA / "corpus"
# CI lays shared/ beside the repository clone (see ../shared/models/README.md).
MODEL_DIR = (
    Path(__file__).resolve().parents[2].parent / "shared" / "models" / "multilingual-e5-small-q4"
)


def make_settings(tmp: Path, **overrides) -> Settings:
    """Settings isolated in ``tmp``; by default the offline E5 model through fastembed."""
    values = {
        "data_dir": tmp / "data",
        "cache_dir": tmp / "cache",
        "embeddings_provider": "fastembed",
        "embeddings_model_path": MODEL_DIR,
        "embeddings_model": None,
        "openai_api_key": None,
        "google_api_key": None,
        "allow_hosts": "",
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_repo(path: Path, files: dict[str, str]) -> Path:
    """A git repository with ``files`` committed (one commit)."""
    if shutil.which("git") is None:
        pytest.skip("git no está instalado")
    path.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        target = path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    git("init", "-q", "-b", "main", cwd=path)
    git("add", "-A", cwd=path)
    git(
        "-c",
        "user.name=Pruebas",
        "-c",
        "user.email=pruebas@example.org",
        "commit",
        "-q",
        "-m",
        "inicial",
        cwd=path,
    )
    return path
