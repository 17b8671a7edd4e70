"""What every command shares about its inputs and errors: the exit codes, the one-line error (exit 2), reading a
file, parsing JSON with a one-line reason, loading the selected subject. cli.py (argument parsing) and the
command helpers (cli_traces.py) both import it; it imports neither."""

from __future__ import annotations

import click

EXIT_OK, EXIT_FINDING, EXIT_ERROR = 0, 1, 2


class Failure(click.ClickException):
    exit_code = EXIT_ERROR


def fail(msg: str):
    raise Failure(msg)


def read(path: str) -> bytes:
    """A file's bytes, read once per process (the trace and the case reader both look at a command's input,
    which may be a pipe such as /dev/stdin)."""
    if path not in _READ:
        try:
            _READ[path] = open(path, "rb").read()
        except OSError as e:
            fail(f"cannot read {path}: {e.strerror}")
    return _READ[path]


_READ: dict[str, bytes] = {}


def parse_json_file(path: str, raw: bytes):
    """JSON from a file's bytes, or one line saying where it is not JSON (line and column)."""
    import json
    if not raw.strip():
        fail(f"{path}: empty file (a Case JSON object was expected; use --as bytes for a fuzz input)")
    if raw.startswith(b"\xef\xbb\xbf"):
        fail(f"{path}: starts with a UTF-8 byte-order mark; save it without one")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(f"{path}: not UTF-8 (byte {e.start}); JSON is UTF-8 text (for a fuzz input: dryz check --as bytes)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        fail(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}")
    except RecursionError:
        fail(f"{path}: JSON nested too deeply")
    except ValueError as e:  # e.g. an integer of more than 4,300 digits
        fail(f"{path}: not usable JSON: {e}")


def signame(sig: int) -> str:
    import signal
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def load_subject():
    """The selected subject, loaded; a library that cannot be loaded or driven is one line and exit 2."""
    from .subject import SubjectError, current
    from .subject.binding import LibraryFinding
    try:
        return current()
    except LibraryFinding as e:
        import sys
        click.echo(f"dryz: finding: subject: {e}", err=True)
        sys.exit(EXIT_FINDING)
    except SubjectError as e:
        fail(f"subject: {e}")


def quiet_mode() -> bool:
    from .report import quiet
    return quiet()


def say(msg: str) -> None:
    """A progress message (step logs of matrix, minimize, fuzz): on stdout, silenced by --quiet."""
    if not quiet_mode():
        click.echo(msg)
