"""The agent with the real retriever: chunks in the system prompt, a ``sources`` event for the
front ends (metadata without the text), and the prompt bounded by IDEE_RAG_MAX_CHARS."""

from __future__ import annotations

from idee_notebook_agent.core.agent import Agent
from idee_notebook_agent.core.conversation import Conversation
from idee_notebook_agent.core.events import SourcesEvent, TextDelta
from idee_notebook_agent.llm.scripted import ScriptedProvider


async def test_an_answer_carries_the_retrieved_context_and_its_sources(corpus_settings):
    provider = ScriptedProvider([["Usa IDEE.layer.WMS (docs/capas.md)."]])
    agent = Agent(corpus_settings)
    agent.providers.register_instance("scripted", provider)
    agent.provider = "scripted"
    events = [e async for e in agent.stream(Conversation(), "¿Cómo añado una capa WMS al mapa?")]

    sources = next(e for e in events if isinstance(e, SourcesEvent)).sources
    assert len(sources) == corpus_settings.rag_top_k
    assert sources[0]["source"] == "docs/capas.md" and isinstance(sources[0]["chunk_index"], int)
    assert all("content" not in s and {"title", "score", "source"} <= set(s) for s in sources)
    wire = SourcesEvent(sources).to_dict()
    assert wire["type"] == "sources" and wire["sources"][0]["source"] == "docs/capas.md"

    system = provider.requests[0].system
    assert "--- Source 1: docs/capas.md ---" in system and "IDEE.layer.WMS" in system
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).startswith("Usa IDEE")


async def test_the_context_in_the_prompt_is_bounded(corpus_settings):
    cfg = corpus_settings.model_copy(update={"rag_max_chars": 400, "rag_top_k": 8})
    provider = ScriptedProvider([["ok"]])
    agent = Agent(cfg)
    agent.providers.register_instance("scripted", provider)
    agent.provider = "scripted"
    events = [e async for e in agent.stream(Conversation(), "capas WMS, WMTS y GeoJSON")]
    assert len(next(e for e in events if isinstance(e, SourcesEvent)).sources) == 8
    system = provider.requests[0].system
    context = system.split("Relevant context from the knowledge base")[1]
    assert len(context) < 400 + 8 * 80  # text bounded; only the per-source headers are extra
