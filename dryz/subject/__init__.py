"""The subject under audit: the interface (interface.py), dryz's own binding to libllama (binding.py), the
libllama implementation and its tree walker (libllama.py), the C call sequencer (_drive.c) and the builder of
patched or older libllamas (build.py).

`current()` is the process's one subject: the library `--lib` / DRYZ_LIB selects, else the pip build's.
"""

from __future__ import annotations

from functools import lru_cache

from .binding import SubjectError
from .interface import Output, Subject
from .libllama import TOKEN_DATA, LibLlama, selected_library

__all__ = ["Output", "Subject", "SubjectError", "LibLlama", "TOKEN_DATA", "current", "selected_library"]


@lru_cache(maxsize=1)
def current() -> LibLlama:
    """The process's one loaded subject (loading costs ~0.1 s; every check shares it). Child processes (fuzz
    jobs, isolated evaluations, pool workers, Dask workers on this machine) inherit DRYZ_LIB and so audit the
    same file."""
    return LibLlama()
