"""Language model providers behind one streaming interface (``ChatProvider``)."""

from .base import ChatProvider, ChatRequest, TextChunk, ToolCallChunk
from .registry import ProviderConfig, ProviderRegistry

__all__ = [
    "ChatProvider",
    "ChatRequest",
    "ProviderConfig",
    "ProviderRegistry",
    "TextChunk",
    "ToolCallChunk",
]
