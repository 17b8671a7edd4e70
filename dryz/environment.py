"""Reading a DRYZ_* variable below the command line (an isolation worker, a subject, the Dask client), with the
same parsing its option's type uses (a duration as --time takes it: seconds()), refused in one line naming the
variable. The registry of the variables, their meanings and option types is dryz.options.ENVIRONMENT, which the
command line checks before any work; this module is the ground those types stand on, so that what runs below the
command line never imports it."""

from __future__ import annotations

import math
import os
import re

from .files import fail

# A duration's units (Duration in dryz.options reads the same forms): 60, 60s, 1.5m, 2 min, 1h, 500ms, 1h30m.
UNITS = {"": 1.0, "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0, "ms": 0.001, "m": 60.0, "min": 60.0,
         "minute": 60.0, "minutes": 60.0, "h": 3600.0, "hour": 3600.0, "hours": 3600.0}


def seconds(value) -> float:
    """A duration as seconds (a number with a unit, or their sums: 1h30m, 2m 30s); ValueError with the reason."""
    text = str(value).lower().strip()
    parts = re.findall(r"(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*", text)
    if not text or "".join(re.findall(r"(?:\d+(?:\.\d*)?|\.\d+)\s*[a-z]*\s*", text)) != text \
            or any(u not in UNITS for _, u in parts) or (len(parts) > 1 and any(not u for _, u in parts)):
        raise ValueError(f"{value!r} is not a duration (seconds: 60, 60s, 1.5m, 2 min, 1h30m)")
    return sum(float(n) * UNITS[u] for n, u in parts)


def duration(lo: float, hi: float):
    """A parser of durations within lo..hi seconds."""
    def parse(value) -> float:
        try:
            secs = float(value)
        except (TypeError, ValueError):
            secs = seconds(value)
        if not math.isfinite(secs) or not lo <= secs <= hi:
            raise ValueError(f"{value!r}: a duration in {lo:g}..{hi:g} seconds")
        return secs
    return parse


def choice(*values: str):
    """A parser of one of these values."""
    def parse(value) -> str:
        if value not in values:
            raise ValueError(f"{value!r}: one of {', '.join(values)}")
        return value
    return parse


def fds(value: str) -> str:
    """R,W: two file descriptors (an isolation worker's pipes)."""
    parts = value.split(",")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"{value!r}: two file descriptors, R,W")
    return value


def read(name: str, parse, default=None):
    """The variable's value as parse reads it (unset or empty: default); one line naming it for a value refused."""
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return parse(raw)
    except ValueError as e:
        fail(f"{name}: {e}")
