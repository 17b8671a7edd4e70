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
