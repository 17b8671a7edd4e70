"""The one error every command ends the same way: a `DryzError` is bad input, a subject or tool that cannot be had,
or the harness in doubt; the command line prints its message as one line (`dryz: error: ...`) and exits 2. Each
module's own error class derives from it, so no command maps them one by one. (This module imports nothing: every
layer may raise one.)"""


EXIT_OK, EXIT_FINDING, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130  # what every command exits with (README)


class DryzError(Exception):
    """One line and exit 2. `prefix` names where it arose when the message alone would not say."""
    prefix = ""

    def line(self) -> str:
        return f"{self.prefix}{self}"


def did_you_mean(value, names) -> str:
    """"; did you mean 'X'?" for the names closest to a value (difflib), or ""."""
    import difflib
    close = difflib.get_close_matches(str(value), [str(n) for n in names], n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


def unknown(what: str, value, names) -> str:
    """The one line for a name that is not in its registry: "unknown WHAT 'value'; did you mean ...? (WHATs:
    every name)"."""
    names = [str(n) for n in names]
    plural = what[:-1] + "ies" if what.endswith("y") else what + "es" if what.endswith(("s", "x")) else what + "s"
    return f"unknown {what} {value!r}{did_you_mean(value, names)} ({plural}: {', '.join(names)})"
