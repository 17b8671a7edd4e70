"""The command line's options: one meaning per name across every command (MEANINGS: a shared option's help starts
with its meaning, and tests/test_cli_options.py checks every command against it), bounded numbers refused while
the arguments are parsed, and the old spellings of renamed options, which keep working for one release: hidden,
each prints one deprecation line on stderr and sets the new option.

The names: `--time` is always the wall-clock seconds this command's work may take (a budget per unit has its own
name: `--time-per-subject`, `--time-per-mutant`); `-j/--jobs` is always processes run in parallel (a compiler's
jobs: `--build-jobs`); `--breakers` is always breaker strings (a campaign's way of drawing breaker sets is
`--breaker-sets`, and reading a campaign's crash file as it drew them `--decode-breakers`); `--release` is a
llama-cpp-python release (`--version` is dryz's own); a list is an option given once per item; an output file is
written only where its option names it.
"""

from __future__ import annotations

import functools

import click
from click.core import ParameterSource

# The meaning of every option more than one command takes: each such option's help starts with this sentence.
MEANINGS = {
    "--json": "Write this command's result as JSON to this file.",
    "--markdown": "Write the result as Markdown to this file.",
    "--html": "Write the result as a self-contained HTML page to this file.",
    "--time": "Wall-clock seconds this command's work may take.",
    "--jobs": "Processes run in parallel.",
    "--workdir": "The folder this command keeps its work in (results, campaigns, logs).",
    "--vocab": "A real vocabulary (a name such as llama-bpe, a ggml-vocab-*.gguf of the pinned sdist, or a GGUF "
               "path).",
    "--corpus": "Where minimized witnesses are written, as corpus entries.",
    "--release": "A llama-cpp-python release (its sdist's vendored llama.cpp).",
    "--base": "The subject to compare with: a llama-cpp-python release (built by dryz subject build), a subject "
              "KIND:ARG, or a libllama.so or its folder.",
    "--as": "The form of the file.",
    "--trace": "The file is a trace.",
    "--decode-breakers": "With --vocab, for a crash file (fuzz bytes): decode it as a `dryz fuzz --vocab NAME "
                         "--breaker-sets MODE` campaign did.",
    "--isolate": "Run every evaluation of the subject in a child process (a case that crashes it is class crash).",
    "--random": "Random fuzz-decoder cases to compare on, besides the edge cases, the corpus and kept inputs.",
    "--lanes": "Gate modes run side by side.",
    "--mode": "One of the gate's modes; give it once per mode.",
    "--scheduler": "Run on this Dask scheduler (pip install 'dryz[dask]') instead of local processes.",
    "--sanitize": "Build with these clang sanitizers (address, undefined); every dryz process on it preloads the "
                  "runtime.",
    "--alphabet": "Number of symbols.",
    "--max-length": "Longest history.",
    "--breakers": "A breaker string (\\n and \\t read as newline and tab), or a preset: default (llama.cpp's \\n : "
                  "\" *) or none; give it once per breaker.",
    "--traces": "Work on traces of calls (accept, apply, reset, clone, free) instead of single cases.",
    "--lib": "The subject: a libllama.so or the folder holding it.",
    "--time-per-subject": "Wall-clock seconds of each subject's fuzz campaign.",
    "--property": "Only this property (repeats, window-cap, breakers, ...: a column of dryz conformance); give it "
                  "once per property. [default: every one]",
}


# --as on a command that reads a case or trace file
READ_AS = ("How it is read: auto (a libFuzzer crash-* file as fuzz bytes, anything else as UTF-8 JSON), json, or "
           "bytes (a fuzz input, decoded as the harness decodes it).")


def meaning(name: str, more: str = "") -> str:
    """The help of a shared option: its meaning, then what this command adds."""
    return MEANINGS[name] + (" " + more if more else "")


class Bound(click.ParamType):
    """An int or float option within lo..hi (hi None: at least lo; a function: its value, asked when an argument
    is read), refused while the arguments are parsed with one line: "--time must be in 10..86400 seconds, got 5"."""

    def __init__(self, kind, lo, hi=None, unit: str = "", hi_text: str | None = None):
        self.kind, self.lo, self.hi, self.unit, self.hi_text = kind, lo, hi, unit, hi_text
        self.name = "integer" if kind is int else "float"

    def convert(self, value, param, ctx):
        try:
            v = self.kind(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{value!r} is not a valid {self.name}", param, ctx)
        hi = self.hi() if callable(self.hi) else self.hi
        if not (self.lo <= v <= (hi if hi is not None else float("inf")) and v < float("inf")):
            where = f"in {self.lo}..{self.hi_text or hi}" if hi is not None else f"at least {self.lo}"
            got = v if self.kind is int else f"{v:.15g}"
            raise click.UsageError(f"{max(param.opts, key=len)} must be {where}{' ' + self.unit if self.unit else ''}, "
                                   f"got {got}")
        return v


# -- old spellings ------------------------------------------------------------------------------------------------

ALIASES = "dryz.aliases"


def old(spelling: str, new: str, param: str, split: bool = False, **kw):
    """A renamed option's old spelling (kept for one release, hidden): it sets the new option's parameter `param`
    (split: a comma-separated list, as the old spelling took it, becomes the new option's repeated values) and
    prints one deprecation line. kw: the old option's type, flag-ness and multiplicity."""
    decls = spelling.split("/")

    def store(ctx, p, value):
        if value is None or value == () or value is False:
            return
        if split:
            value = tuple(x.strip() for v in (value if isinstance(value, tuple) else (value,))
                          for x in str(v).split(",") if x.strip())
        click.echo(f"dryz: warning: {max(decls, key=len)} is deprecated and goes in the next release; use {new}",
                   err=True)
        ctx.meta.setdefault(ALIASES, {})[param] = (value, max(decls, key=len), new)
    return click.option(*decls, param + "__old", hidden=True, expose_value=False, callback=store, **kw)


def with_old_spellings(f):
    """The command's old spellings applied: each sets its new option's value (both given: one line, exit 2)."""
    @functools.wraps(f)
    def run(*args, **kwargs):
        ctx = click.get_current_context()
        for param, (value, spelled, new) in ctx.meta.get(ALIASES, {}).items():
            if ctx.get_parameter_source(param) not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP, None):
                raise click.UsageError(f"give {new} or {spelled}, not both ({spelled} is its old spelling)")
            kwargs[param] = value
        return f(*args, **kwargs)
    return run


def _max_alphabet() -> int:
    from .symbols import MAX_ALPHABET  # on use: keeps start-up fast
    return MAX_ALPHABET


def _max_trace_events() -> int:
    from .enumerate.selection import MAX_TRACE_EVENTS  # on use: keeps start-up fast (it loads the enumerator)
    return MAX_TRACE_EVENTS


def _sanitizers(ctx, param, value) -> tuple[str, ...]:
    """--sanitize NAME (once per sanitizer; a comma-separated list is read as its items), as the builder takes it,
    refused with one line while parsing."""
    from .subject.build import parse_sanitize  # on use: keeps start-up fast
    try:
        return parse_sanitize(",".join(value)) if value else ()
    except ValueError as e:
        raise click.UsageError(str(e))


def case_file_options(f):
    """--vocab, --decode-breakers and --trace, as every command that reads one case or trace file takes them."""
    f = click.option("--trace", "as_trace", is_flag=True,
                     help=meaning("--trace", "Trace JSON and trace corpus entries are recognised without it; a "
                                             "`dryz fuzz --traces` crash file, or an input read --as bytes, needs "
                                             "it."))(f)
    f = click.option("--decode-breakers", "breakers", default=None, type=click.Choice(["default", "dict", "random"]),
                     help=meaning("--decode-breakers", "[default: default]"))(f)
    f = old("--breakers", "--decode-breakers", "breakers", type=click.Choice(["default", "dict", "random"]))(f)
    return click.option("--vocab", "vocab", default=None, metavar="NAME|PATH",
                        help=meaning("--vocab", "Run the case on it: its token ids are that vocabulary's; a crash "
                                                "file (fuzz bytes) is decoded as `dryz fuzz --vocab` decodes its "
                                                "inputs."))(f)
