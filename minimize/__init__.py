"""Generic delta-debugging minimization (ddmin) and small scalar shrinkers."""

from .ddmin import Result, ddmin, is_one_minimal, minimize_int, shrink_towards

__all__ = ["Result", "ddmin", "is_one_minimal", "minimize_int", "shrink_towards"]
