"""Generic minimization: delta debugging (ddmin), small scalar shrinkers, named passes run to a fixpoint with
per-pass statistics, and the "every shorter candidate" search that proves a result shortest."""

from .ddmin import Result, ddmin, is_one_minimal, minimize_int, shrink_towards
from .passes import BUDGET, PassStats, first_shorter, fixpoint, shortest

__all__ = ["Result", "ddmin", "is_one_minimal", "minimize_int", "shrink_towards", "BUDGET", "PassStats",
           "first_shorter", "fixpoint", "shortest"]
