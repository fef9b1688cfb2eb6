"""Errors of the knowledge base, with messages a user can act on (Spanish first)."""

from __future__ import annotations

from ..errors import IdeeAgentError


class KnowledgeError(IdeeAgentError):
    """Indexing or retrieval failed for a reason the user can fix (bad source, bad name...)."""


class EmbeddingsUnavailableError(KnowledgeError):
    """No embedding model can be used (not downloadable, no key...); BM25 still works."""


class IndexMismatchError(KnowledgeError):
    """The index was built with another embedding model or dimension than the one in use."""
