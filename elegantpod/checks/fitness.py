"""Fitness names: what a tournament ranks its pods by, and the check of a name."""

from __future__ import annotations

from typing import Any

from elegantpod.checks.text import short

FITNESSES = ("return", "sharpe", "calmar", "sortino", "annual_return", "cumulative_return")
"""Fitness names: the mean evaluation return, or a finance metric of the evaluation
episodes (higher is better for each)."""


def check_fitness(fitness: Any) -> None:
    """Raise ``ValueError`` naming ``fitness`` unless it is one of :data:`FITNESSES`."""
    if fitness not in FITNESSES:
        raise ValueError(f"unknown fitness {short(fitness)}; choose one of {list(FITNESSES)}")
