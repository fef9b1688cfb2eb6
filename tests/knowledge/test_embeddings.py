"""Embedding models: the real fastembed loading code offline, OpenAI and Gemini through loopback
fakes of their endpoints, and clear messages when no model can be used."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from idee_notebook_agent.knowledge import embeddings as emb
from idee_notebook_agent.knowledge.errors import EmbeddingsUnavailableError
from tests.fakes.embeddings_server import FakeEmbeddingsServer
from tests.knowledge.helpers import make_settings


def test_fastembed_loads_the_local_model_offline_and_ranks_by_meaning(model_dir, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = emb.load_fastembed(model_path=model_dir)
    assert model.name == "fastembed:local/multilingual-e5-small-q4" and model.dim == 384
    query = model.embed_query("¿Dónde hay una piscina pública?")
    docs = model.embed_documents(
        ["Piscina municipal al aire libre, abierta en verano.", "Panadería con pan del día."]
    )
    assert docs.shape == (2, 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    scores = docs @ query
    assert scores[0] > scores[1]


def test_e5_models_get_query_and_passage_prefixes(model_dir):
    model = emb.load_fastembed(model_path=model_dir)
    plain = emb._normalise(list(model._model.embed(["capa WMS"])))[0]
    assert not np.allclose(model.embed_query("capa WMS"), plain)
    prefixed = emb._normalise(list(model._model.embed(["query: capa WMS"])))[0]
    assert np.allclose(model.embed_query("capa WMS"), prefixed, atol=1e-6)


def test_a_model_is_loaded_once_per_process_even_from_many_threads(model_dir):
    got: list[object] = []
    barrier = threading.Barrier(4)

    def load() -> None:
        barrier.wait()
        got.append(emb.load_fastembed(model_path=model_dir))

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(m is got[0] for m in got)


def test_a_model_that_cannot_be_downloaded_gets_a_clear_message(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # fail at once instead of retrying the network
    with pytest.raises(EmbeddingsUnavailableError) as info:
        emb.load_fastembed(
            "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
            cache_dir=tmp_path / "empty-cache",
            allow_download=False,
        )
    message = str(info.value)
    assert "No se pudo cargar el modelo de embeddings" in message
    assert "EMBEDDINGS_MODEL_PATH" in message and "idee-agent index" in message


def test_unknown_model_names_and_bad_folders_are_refused_clearly(tmp_path):
    with pytest.raises(EmbeddingsUnavailableError, match="list_supported_models"):
        emb.load_fastembed("no/existe-este-modelo", cache_dir=tmp_path)
    with pytest.raises(EmbeddingsUnavailableError, match="no es una carpeta"):
        emb.load_fastembed(model_path=tmp_path / "no-hay-nada")


def test_the_default_model_is_multilingual_and_in_fastembeds_list():
    from fastembed import TextEmbedding

    listed = {m["model"]: m for m in TextEmbedding.list_supported_models()}
    assert emb.DEFAULT_FASTEMBED_MODEL in listed
    description = listed[emb.DEFAULT_FASTEMBED_MODEL]["description"].lower()
    assert "spanish" in description or "multilingual" in description


def test_provider_selection(tmp_path):
    assert emb.resolve_provider(make_settings(tmp_path, embeddings_provider="auto")) == "fastembed"
    assert emb.resolve_provider(make_settings(tmp_path, embeddings_provider="local")) == "fastembed"
    assert emb.resolve_provider(make_settings(tmp_path, embeddings_provider="none")) == "none"
    with pytest.raises(EmbeddingsUnavailableError, match="EMBEDDINGS_PROVIDER"):
        emb.resolve_provider(make_settings(tmp_path, embeddings_provider="word2vec"))
    cfg = make_settings(tmp_path, embeddings_provider="openai", embeddings_model_path=None)
    assert emb.configured_name(cfg) == "openai:text-embedding-3-small"
    cfg = make_settings(tmp_path, embeddings_provider="fastembed", embeddings_model_path=None)
    assert emb.configured_name(cfg) == f"fastembed:{emb.DEFAULT_FASTEMBED_MODEL}"


@pytest.fixture
def fake_server():
    server = FakeEmbeddingsServer(api_key="clave-buena").start()
    yield server
    server.stop()


def test_openai_embeddings_through_the_sdk_are_normalised_and_in_order(tmp_path, fake_server):
    cfg = make_settings(
        tmp_path,
        embeddings_provider="openai",
        openai_api_key="clave-buena",
        openai_base_url=fake_server.openai_base_url,
    )
    model = emb.get_embedder(cfg)
    texts = ["capa WMS del PNOA", "evento de clic", "capa WMS del PNOA"]
    vectors = model.embed_documents(texts)
    assert vectors.shape == (3, fake_server.dim) and model.dim == fake_server.dim
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[0], vectors[2]) and not np.allclose(vectors[0], vectors[1])
    path, body, headers = fake_server.requests[-1]
    assert path == "/v1/embeddings" and body["input"] == texts
    assert body["model"] == "text-embedding-3-small"
    query = model.embed_query("capa WMS")
    assert float(vectors[0] @ query) > float(vectors[1] @ query)


def test_openai_with_a_bad_key_says_what_to_check(tmp_path, fake_server):
    cfg = make_settings(
        tmp_path,
        embeddings_provider="openai",
        openai_api_key="clave-mala",
        openai_base_url=fake_server.openai_base_url,
        llm_max_retries=0,
    )
    with pytest.raises(EmbeddingsUnavailableError, match="OPENAI_API_KEY"):
        emb.get_embedder(cfg).embed_documents(["hola"])
    with pytest.raises(EmbeddingsUnavailableError, match="necesita OPENAI_API_KEY"):
        emb.get_embedder(make_settings(tmp_path, embeddings_provider="openai"))


def test_gemini_embeddings_through_the_sdk_in_batches_of_100(tmp_path, fake_server):
    cfg = make_settings(
        tmp_path,
        embeddings_provider="gemini",
        google_api_key="clave-buena",
        gemini_base_url=fake_server.root,
    )
    model = emb.get_embedder(cfg)
    assert model.name == "gemini:gemini-embedding-001"
    texts = [f"documento número {i} sobre capas" for i in range(130)]
    vectors = model.embed_documents(texts)
    assert vectors.shape == (130, fake_server.dim)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    batches = [b for p, b, _ in fake_server.requests if p.endswith(":batchEmbedContents")]
    assert [len(b["requests"]) for b in batches] == [100, 30]
    assert batches[0]["requests"][0]["taskType"] == "RETRIEVAL_DOCUMENT"
    model.embed_query("capas")
    assert fake_server.requests[-1][1]["requests"][0]["taskType"] == "RETRIEVAL_QUERY"


def test_gemini_with_a_bad_key_says_what_to_check(tmp_path, fake_server):
    cfg = make_settings(
        tmp_path,
        embeddings_provider="gemini",
        google_api_key="clave-mala",
        gemini_base_url=fake_server.root,
    )
    with pytest.raises(EmbeddingsUnavailableError, match="GOOGLE_API_KEY"):
        emb.get_embedder(cfg).embed_query("hola")


def test_custom_model_folder_without_config_is_refused(tmp_path: Path):
    folder = tmp_path / "modelo"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"no es un modelo")
    with pytest.raises(EmbeddingsUnavailableError, match="hidden_size"):
        emb.load_fastembed(model_path=folder)


def test_prefixes_follow_the_model_family():
    assert emb._prefixes("intfloat/multilingual-e5-large") == ("query: ", "passage: ")
    assert emb._prefixes("nomic-ai/nomic-embed-text-v1.5")[0] == "search_query: "
    assert emb._prefixes(emb.DEFAULT_FASTEMBED_MODEL) == ("", "")
    assert emb._prefixes("acme/model-v5") == ("", "")
