"""Knowledge base (RAG): index git repositories, documentation sites and folders, and retrieve
the chunks that answer a question with hybrid search (FAISS + BM25, reciprocal-rank fusion).

Modules: ``chunking`` (+ ``code_splitters``, ``markup_splitters``), ``embeddings`` (fastembed,
OpenAI, Gemini), ``index`` (one source's FAISS + BM25), ``store`` (atomic versions on disk),
``indexers`` and ``crawler`` (collect documents, build, publish), ``retriever`` (what the agent
calls), ``commands`` (``idee-agent index`` / ``sources``). Heavy libraries load on first use.
"""
