"""What is audited. The protocol every mode uses (protocol.py), the kinds and how one is selected (registry.py),
the one way to run a subject in another process (isolation.py), and the kinds themselves: libllama through
dryz's own ctypes binding (binding.py, libllama.py, its C call sequencer _drive.c and tree walker walker.py);
the vocabularies (symbols.py, symbol_vocab.py, vendored_vocabs.py); the builder of patched or older
libllamas (build.py).

There is no process-wide subject: a command opens the one the user selected and passes it down.
"""

from __future__ import annotations

from .binding import SubjectError
from .answers import Capabilities, Crash, Output, SubjectCrashed
from .protocol import Subject
from .registry import open_subject, opened, selected_spec

__all__ = ["Capabilities", "Crash", "Output", "Subject", "SubjectCrashed", "SubjectError", "open_subject",
           "opened", "selected_spec"]
