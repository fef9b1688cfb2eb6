"""The offline planner's parts: YAML rules, parsing, recipes and the stateless runner."""

from __future__ import annotations

from .parse import Parsed, Step, parse
from .rules import PlannerData, load_planner_data

__all__ = ["Parsed", "PlannerData", "Step", "load_planner_data", "parse"]
