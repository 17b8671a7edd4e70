"""`dryz export --as issue`: a difference of another engine's DRY from llama.cpp's as the bug report its maintainers
act on without dryz (pure: from a witness and what was recorded of it; the only run is the generated script's,
when the engine is here).

- witness.py: the witnesses, one per cause: a corpus entry or a minimized conformance witness (the cause it was
  kept for, the subject's answer, the engine's source lines and documentation as the adapter gave them), or a
  subject's row (a `dryz properties` or `dryz conformance` result, or the subject run now).
- scripts/: per engine, a reproduction script from the witness that calls only the engine's own API (no dryz):
  what llama.cpp gives (dryz's model, as numbers), what the engine gives, exit 1 while it differs.
- report.py: the Markdown: a title naming the behaviour, the shortest input, the numbers, the cause with the
  engine's source lines, the engine's documentation where it declares the difference, the script.
- command.py: the command (one entry, or a subject's every cause).
"""
