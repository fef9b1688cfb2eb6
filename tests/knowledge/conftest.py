"""Fixtures of the knowledge tests: the offline E5 model, settings in a temporary data folder
and one shared index of the test corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from idee_notebook_agent.config import Settings
from idee_notebook_agent.knowledge import retriever as retriever_module
from tests.knowledge.helpers import CORPUS, MODEL_DIR, make_settings


@pytest.fixture(scope="session")
def model_dir() -> Path:
    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.skip(
            f"Modelo de prueba ausente en {MODEL_DIR} (shared/models junto al repositorio); "
            "las pruebas de embeddings reales se omiten."
        )
    return MODEL_DIR


@pytest.fixture
def settings(tmp_path: Path, model_dir: Path) -> Settings:
    return make_settings(tmp_path)


@pytest.fixture(autouse=True)
def _fresh_retrievers():
    retriever_module.clear_cache()
    yield
    retriever_module.clear_cache()


@pytest.fixture(scope="session")
def corpus_settings(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Settings:
    """The test corpus indexed once (with the E5 model) for the read-only tests."""
    from idee_notebook_agent.knowledge.indexers import index_source

    tmp = tmp_path_factory.mktemp("corpus-index")
    cfg = make_settings(tmp)
    index_source(str(CORPUS), "path", name="corpus", settings=cfg, progress=False)
    return cfg
