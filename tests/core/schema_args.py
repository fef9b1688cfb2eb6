"""Generate valid arguments from a tool's JSON Schema (the subset our specs use)."""

from __future__ import annotations

import random
from typing import Any


def example(schema: dict[str, Any], rng: random.Random, *, full: bool) -> Any:
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        names = [n for n in props if full or n in required or rng.random() < 0.5]
        return {n: example(props[n], rng, full=full) for n in names}
    if kind == "integer":
        lo, hi = schema.get("minimum", 0), schema.get("maximum", 20)
        return rng.randint(int(lo), int(hi))
    if kind == "number":
        lo, hi = schema.get("minimum", -5.0), schema.get("maximum", 5.0)
        return round(rng.uniform(lo, hi), 4) + (40.0 if lo == -5.0 and hi == 5.0 else 0.0)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        return [example(schema.get("items", {"type": "string"}), rng, full=full)]
    return schema.get("default", "valor")
