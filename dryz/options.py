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
import math

import click

from .environment import UNITS, fds, seconds
from click.core import ParameterSource

from .errors import DryzError, unknown  # (unknown: the one line for a name not in its registry, re-exported)

# The meaning of every option more than one command takes: each such option's help starts with this sentence.
MEANINGS = {
    "--cause": "Keep this cause instead of the failure's class: the answer stays explained by llama.cpp's DRY composed "
               "with the --fitted causes and not without MODEL (`unexplained`: by no composition of them); the witness `dryz "
               "conformance` minimizes for each cause.",
    "--fitted": "One of the subject's fitted causes, a deviation model (`dryz properties` fits them), once per cause: "
                "a difference they explain is kept (minimize --cause) or counted per cause, not a finding (fuzz).",
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
            raise click.UsageError(f"{_where(param, ctx)} must be {where}{' ' + self.unit if self.unit else ''}, "
                                   f"got {got}")
        return v


def _where(param, ctx) -> str:
    """What a refused value is named by: its option, or the environment variable it came from."""
    if param is None:
        return "value"
    if isinstance(param, str):  # an environment variable's name (options.env)
        return param
    if isinstance(param, click.Argument):  # an argument: the reason names the file or value itself
        return ""
    if ctx is not None and param.name and ctx.get_parameter_source(param.name) is ParameterSource.ENVIRONMENT:
        env = param.envvar if isinstance(param.envvar, str) else None
        if env:
            return env
    return max(param.opts, key=len) if param.opts else param.human_readable_name


def refuse(param, ctx, reason: str):
    """The one line (exit 2) for a refused value: "OPTION: reason" (the reason as it is where it names the option
    itself)."""
    where = _where(param, ctx)
    raise click.UsageError(reason if not where or reason.startswith(where + " ") else f"{where}: {reason}")


class Checked(click.ParamType):
    """A kind of input checked while the arguments are parsed, before any work: check(value) returns the value as
    the command takes it or raises ValueError (a DryzError too) with the reason; refused in one line,
    "OPTION: reason" (or "VARIABLE: reason" where it came from the environment). `bad`: values of this kind that
    must be refused (tests/test_refuse.py feeds each to every option of the kind)."""
    name = "text"
    bad: tuple = ()

    def check(self, value):
        return value

    def convert(self, value, param, ctx):
        try:
            return self.check(value)
        except (ValueError, DryzError) as e:
            refuse(param, ctx, str(e))


class Output(Checked):
    """A file (folder=True: a folder) this command writes: proven writable by creating and removing a file beside
    it (dryz.files.writable), so a refused command has written nothing and made no folder."""
    bad = ("/proc/dryz-refused", "/dev/null")

    def __init__(self, folder: bool = False):
        self.folder = folder
        self.name = "folder" if folder else "file"

    def check(self, value):
        from .files import writable  # on use: keeps start-up fast
        writable(value, self.folder)
        return value


class Input(Checked):
    """A file (folder=True: a folder; either=True: either) this command reads: it exists and can be read; with
    `read`, a function of the path that reads it and raises (one line) where its shape is not its format's
    (dryz.formats). updated: an output may name it (a run it continues and rewrites: --resume)."""
    bad = ("/nonexistent/dryz-refused",)

    def __init__(self, folder: bool = False, either: bool = False, read=None, also=(), updated: bool = False):
        self.folder, self.either, self.read, self.also, self.updated = folder, either, read, tuple(also), updated
        self.name = "path" if either else "folder" if folder else "file"

    def check(self, value):
        from .files import readable  # on use: keeps start-up fast
        if value in self.also:  # a word the option takes instead of a file (--kill-order gate)
            return value
        readable(value, None if self.either else self.folder)
        if self.read is not None:
            self.read(value)
        return value


class Name(Checked):
    """A name from a registry (names: a function returning them, asked on use), refused with the closest names
    ("did you mean"). key: the part of the value that is the name (CLASS of CLASS@window=-1); form: a regular
    expression the whole value must match, said as form_text."""
    bad = ("no-such-name",)

    def __init__(self, what: str, names, key=None, form=None, form_text: str = "", also=()):
        self.what, self.names, self.key, self.form, self.form_text, self.also = what, names, key, form, form_text, also
        self.name = "name"

    def check(self, value):
        import re
        names = list(self.names())
        if value in self.also:
            return value
        k = self.key(value) if self.key else value
        if k not in names:
            raise ValueError(unknown(self.what, value if k == value else k, names))
        if self.form is not None and not re.fullmatch(self.form, value):
            raise ValueError(f"{value!r}: not of the form {self.form_text}")
        return value


class Subject(Checked):
    """A subject spec KIND:ARG (with its +declare= fixes): the kind, its argument (an engine's name, a file) and
    the fixes checked against their registries (dryz.subject.registry.check_spec), without opening it. bare:
    words that stand for a subject where this option takes them (conformance's `server`)."""
    bad = ("nosuchkind:x", "engine:no-such-engine", "libllama:/nonexistent/libllama.so", "libllama:+declare=",
           "libllama:+declare=finite-penalty:saturat", "engine:exllamav2+patch=/nonexistent/fix.diff",
           "engine:mistralrs+patch=/etc/hostname")

    def __init__(self, bare=(), kind: str = ""):
        self.bare, self.kind = tuple(bare), kind
        self.name = "subject"
        if kind:  # a path of one kind (--lib PATH: libllama:PATH)
            self.bad = ("/nonexistent/libllama.so",)

    def check(self, value):
        if value in self.bare:
            return value
        from .subject.registry import check_spec, normal_spec  # on use: keeps start-up fast
        if self.kind:
            if not str(value).strip():
                raise ValueError("an empty path")
            check_spec(f"{self.kind}:{value}")
            return value
        check_spec(value)
        return normal_spec(value)


class Base(Subject):
    """What a subject is compared with (--base): a llama-cpp-python release VERSION (built on use), a subject
    KIND:ARG, or a libllama PATH (dryz.subject.registry.resolve_base reads it so)."""
    bad = ("engine:no-such-engine", "/nonexistent/libllama.so", "0.3.x")

    def check(self, value):
        import re
        from .subject.registry import KINDS, check_spec  # on use: keeps start-up fast
        if re.fullmatch(r"\d+\.\d+\.\d+", value):
            return value
        if value.split(":", 1)[0] in KINDS and ":" in value:
            check_spec(value)
            from .subject.registry import normal_spec  # on use: keeps start-up fast
            return normal_spec(value)
        else:
            check_spec(f"libllama:{value}")
        return value


class Parsed(Checked):
    """A value with a form of its own, read by the function its module reads it with (parse(value) raises
    ValueError or a DryzError with the reason); bad: values of the form that must be refused, good: one taken."""

    def __init__(self, what: str, parse, bad=(), good: str = ""):
        self.name, self.parse, self.bad, self.good = what, parse, tuple(bad), good

    def check(self, value):
        self.parse(value)
        return value


class Vocabulary(Checked):
    """A real vocabulary: a vendored name, the file name of one (ggml-vocab-NAME.gguf), or a GGUF path; `every`:
    a word for every vendored one (restarts' `all`)."""
    bad = ("no-such-vocab", "/nonexistent/v.gguf")

    def __init__(self, every: str | None = None):
        self.every = every
        self.name = "vocabulary"

    def check(self, value):
        if self.every is not None and value == self.every:
            return value
        from .subject.vendored_vocabs import check_vocab  # on use: keeps start-up fast
        check_vocab(value)
        return value


class Duration(Bound):
    """Seconds: a number, optionally with a unit (60, 60s, 1.5m, 2 min, 1h, 500ms), the same forms in every
    option and environment variable that takes a duration; within lo..hi (whole: whole seconds)."""
    UNITS = UNITS
    bad = ("soon", "-5", "10x")

    def __init__(self, lo, hi=None, whole: bool = False, hi_text: str | None = None):
        super().__init__(int if whole else float, lo, hi, "seconds", hi_text)
        self.name = "duration"

    def convert(self, value, param, ctx):
        try:
            secs = float(value)  # a plain number (-5, 1e3): the bounds say what is wrong with it
        except (TypeError, ValueError):
            try:
                secs = seconds(value)
            except ValueError as e:
                refuse(param, ctx, str(e))
        if not math.isfinite(secs):
            refuse(param, ctx, f"{value!r} is not a finite duration")
        if self.kind is int:
            if secs != int(secs):
                refuse(param, ctx, f"whole seconds, got {value!r}")
            secs = int(secs)
        return super().convert(secs, param, ctx)


# -- old spellings ------------------------------------------------------------------------------------------------

ALIASES = "dryz.aliases"


def old(spelling: str, new: str, param: str, split: bool = False, item=None, **kw):
    """A renamed option's old spelling (kept for one release, hidden): it sets the new option's parameter `param`
    (split: a comma-separated list, as the old spelling took it, becomes the new option's repeated values, each
    checked as the new option's type `item` checks it) and prints one deprecation line. kw: the old option's type,
    flag-ness and multiplicity."""
    decls = spelling.split("/")

    def store(ctx, p, value):
        if value is None or value == () or value is False:
            return
        if split:
            value = tuple(x.strip() for v in (value if isinstance(value, tuple) else (value,))
                          for x in str(v).split(",") if x.strip())
            if item is not None:
                value = tuple(item.convert(x, p, ctx) for x in value)
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


def read_as_option(f):
    """--as: how an input file is read (check, explain, minimize)."""
    return click.option("--as", "read_as", type=click.Choice(["auto", "json", "bytes"]), default="auto",
                        show_default=True, help=meaning("--as", READ_AS))(f)


def case_file_options(f):
    """--vocab, --decode-breakers and --trace, as every command that reads one case or trace file takes them."""
    f = click.option("--trace", "as_trace", is_flag=True,
                     help=meaning("--trace", "Trace JSON and trace corpus entries are recognised without it; a "
                                             "`dryz fuzz --traces` crash file, or an input read --as bytes, needs "
                                             "it."))(f)
    f = click.option("--decode-breakers", "breakers", default=None, type=click.Choice(["default", "dict", "random"]),
                     help=meaning("--decode-breakers", "[default: default]"))(f)
    f = old("--breakers", "--decode-breakers", "breakers", type=click.Choice(["default", "dict", "random"]))(f)
    return click.option("--vocab", "vocab", default=None, type=VOCAB, metavar="NAME|PATH",
                        help=meaning("--vocab", "Run the case on it: its token ids are that vocabulary's; a crash "
                                                "file (fuzz bytes) is decoded as `dryz fuzz --vocab` decodes its "
                                                "inputs."))(f)


# -- the kinds of input, one instance each: every option of a kind takes it (tests/test_refuse.py sweeps them) ----

def _fix(value: str) -> None:
    """--declare FIX: a fix dryz models (whether this subject's kind may declare it is asked once the subject is
    selected: dryz.inputs.selected)."""
    from .oracle.deviations import check_fixes  # on use: keeps start-up fast
    if not value.strip():
        raise ValueError("an empty fix (give --declare FIX)")
    check_fixes([value], request_layer="any")


def _cause(value: str) -> None:
    """minimize --cause: a deviation model (dryz.oracle.deviations), or `unexplained`."""
    from .oracle.deviations import parse  # on use: keeps start-up fast
    if value != "unexplained":
        parse(value)


def _model(value: str) -> None:
    """--fitted: a deviation model (dryz.oracle.deviations)."""
    from .oracle.deviations import parse  # on use: keeps start-up fast
    parse(value)


def _causes(value: str) -> None:
    """DRYZ_CAUSES: deviation models, comma-separated (a campaign's own variable)."""
    for m in (x for x in value.split(",") if x):
        _model(m)


def _properties():
    from .conformance.properties import BY_NAME  # on use: keeps start-up fast
    return BY_NAME


def _modes():
    from .gate.modes import NAMES  # on use: keeps start-up fast
    return NAMES


def _operators():
    from .mutate.operators import OPERATORS  # on use: keeps start-up fast
    return OPERATORS


def _declarable():
    from .gate.changes import declarable  # on use: keeps start-up fast
    return declarable()


def _change_form():
    from .gate.changes import DECLARED, DECLARED_FORM  # on use: keeps start-up fast
    return DECLARED.pattern, DECLARED_FORM


def _release(value: str) -> None:
    import re
    if not re.fullmatch(r"\d+\.\d+\.\d+", value):
        raise ValueError(f"{value!r}: a llama-cpp-python release looks like 0.3.36")


def _matrix_release(value: str) -> None:
    """A row of dryz matrix: a release, xllamacpp (its latest wheel) or xllamacpp==V, or none."""
    if value in ("none", "xllamacpp"):
        return
    if value.startswith("xllamacpp=="):
        import re
        if not re.fullmatch(r"\d+(\.\d+)*", value.removeprefix("xllamacpp==")):
            raise ValueError(f"{value!r}: an xllamacpp version looks like xllamacpp==0.2.9")
        return
    _release(value)


def _space_config(value: str) -> None:
    from .config import space_config  # on use: keeps start-up fast
    from .symbols import MAX_ALPHABET  # on use: keeps start-up fast
    from .case import CaseError  # on use: keeps start-up fast
    from .config import CONFIG_NAMES  # on use: keeps start-up fast
    try:
        space_config(value, MAX_ALPHABET, 11)
    except CaseError:
        pass  # a known name whose parameters the space judges (select_space says why, before any work)
    except ValueError:
        raise ValueError(unknown("configuration", value, [*CONFIG_NAMES, "windowW (W >= 1)"])
                         + ", each optionally NAME/allowedA/mM/bB") from None


def _shard(value: str) -> None:
    from .enumerate.selection import parse_shard  # on use: keeps start-up fast
    parse_shard(value)


def _scheduler(value: str) -> None:
    from .enumerate.dask_exec import parse_address  # on use: keeps start-up fast
    parse_address(value)


class ChangeClass(Name):
    """A behaviour change the gate may be told to expect: CLASS[@window...], CLASS from dryz.gate.changes; or, on
    an engine's gate, a cause its patch removes (a deviation model: dryz.gate.causes)."""

    def __init__(self):
        super().__init__("change class", _declarable, key=lambda v: v.split("@", 1)[0])

    def check(self, value):
        import re
        from .gate.changes import is_model  # on use: keeps start-up fast
        if is_model(value):
            return value
        super().check(value)
        form, said = _change_form()
        if not re.fullmatch(form, value):
            raise ValueError(f"{value!r}: a class is {said}")
        return value


def read_expect_file(path) -> list[str]:
    """--expect-file: one change class a line (# comments), each checked as --expect-change checks it; ValueError
    naming the file and line."""
    from .gate.changes import read_expect_file as lines  # on use: keeps start-up fast
    out = []
    for i, d in lines(path):
        try:
            out.append(CHANGE.check(d))
        except ValueError as e:
            raise ValueError(f"{path} line {i}: {e}") from None
    return out


OUTPUT = Output()                      # --json, --markdown, --html, --output
OUTPUT_FOLDER = Output(folder=True)    # --workdir, --corpus, --artifacts, --test-set
INPUT = Input()                        # a file a command reads
INPUT_FOLDER = Input(folder=True)      # a folder a command reads
VOCAB = Vocabulary()
SUBJECT = Subject()
LIB = Subject(kind="libllama")
BASE = Base()
FIX = Parsed("fix", _fix, bad=("finite-penalty:saturat", ""), good="finite-penalty:saturate")
PROPERTY = Name("property", _properties)
CAUSE = Parsed("cause", _cause, bad=("match-cap:0", "no-such-model"), good="match-cap:12")
CAUSES = Parsed("causes", _causes, bad=("match-cap:12,nope",), good="match-cap:12,no-clamp")
FITTED = Parsed("cause", _model, bad=("match-cap:0", "no-such-model"), good="match-cap:12")
MODE = Name("mode", _modes)
OPERATOR = Name("operator", _operators)
CHANGE = ChangeClass()
RELEASE = Parsed("release", _release, bad=("0.3.x", "latest"), good="0.3.36")
MATRIX_RELEASE = Parsed("release", _matrix_release, bad=("0.3.x", "xllamacpp==x"), good="xllamacpp==0.2.9")
SPACE_CONFIG = Parsed("configuration", _space_config, bad=("nope", "window0"), good="window4/allowed2")
def _reader(key: str):
    def read_file(path):
        from .formats import read_as  # on use: keeps start-up fast
        return read_as(key)(path)
    return read_file


def _kill_order(path):
    from .formats import kill_order_file  # on use: keeps start-up fast
    return kill_order_file(path)


def _report_input(path):
    from .formats import report_input  # on use: keeps start-up fast
    return report_input(path)


def _case_or_trace(path):
    from .formats import case_or_trace  # on use: keeps start-up fast
    return case_or_trace(path)


WITNESS = Input(read=_case_or_trace)                 # properties --witness: a case, trace, entry or crash file
CERTIFICATE = Input(read=_reader("certificate"))     # merge's shards
RESUMED = Input(read=_reader("certificate"), updated=True)  # exhaustive --resume: rewritten as the run goes on
def _entry(path):
    from .formats import entry_file  # on use: keeps start-up fast
    return entry_file(path)


ENTRY = Input(read=_entry)                           # export's corpus entry


def _issue_result(path):
    from .issue.witness import IssueError, read_result  # on use: keeps start-up fast
    tool = read_result(path).get("tool")
    if tool not in ("dryz properties", "dryz conformance"):
        raise IssueError(f"{path}: not a dryz properties or dryz conformance result (its tool: {tool!r})")


ISSUE_RESULT = Input(read=_issue_result)             # export --as issue --result: a subject's causes
TRIAGE = Input(read=_reader("triage"))               # mutate --triage
KILL_ORDER = Input(also=("gate",), read=_kill_order)  # mutate --kill-order
REPORT_INPUT = Input(either=True, read=_report_input)  # report's inputs
SUBJECT_OR_SERVER = Subject(bare=("server",))  # conformance --row: `server` is the pinned release's llama-server
EXPECT_FILE = Input(read=read_expect_file)
def _sanitizer(value: str) -> None:
    from .subject.build import parse_sanitize  # on use: keeps start-up fast
    if not value.strip():
        raise ValueError("an empty sanitizer name (address, undefined)")
    parse_sanitize(value)


SANITIZER = Parsed("sanitizer", _sanitizer, bad=("leak", ""), good="address")  # (the callback joins them)
SHARD = Parsed("shard", _shard, bad=("3/2", "x"), good="1/2")
SCHEDULER = Parsed("address", _scheduler, bad=("garbage", "ftp://h:1"), good="tcp://127.0.0.1:8786")


# -- environment variables: each read with the type of the option it stands for ------------------------------------

def _program(value: str) -> None:
    import shutil
    if shutil.which(value) is None:
        raise ValueError(f"{value!r}: no such program (a path, or a name on PATH)")


def _fds(value: str) -> None:
    fds(value)


class Var:
    """A DRYZ_* variable: who sets it (user, control, internal), what it means (the environment page), the type
    its value is read with (an option's type where it stands for one), and that option's spellings (given on the
    command line, the option wins and the variable is not read)."""

    def __init__(self, group: str, meaning: str, type=None, option: tuple = ()):
        self.group, self.meaning, self.type, self.option = group, meaning, type, tuple(option)


BOOLEAN_01 = click.Choice(["0", "1"])
ENVIRONMENT = {
    "DRYZ_SUBJECT": Var("user", "The subject under audit, as `--subject KIND:ARG` (the option wins); a spec ending in "
                                "`+declare=FIX[,FIX]` declares fixes, as `--declare FIX` writes it for every process "
                                "dryz starts.", SUBJECT, ("--subject",)),
    "DRYZ_LIB": Var("user", "The libllama under audit, as `--lib PATH` (short for `libllama:PATH`).", LIB,
                    ("--lib", "--subject")),
    "DRYZ_QUIET": Var("user", "`1`: no progress output, as `-q`.", BOOLEAN_01, ("-q", "--quiet")),
    "DRYZ_NO_BUILD": Var("user", "`1`: refuse any build a command needs and the cache lacks, as `--no-build`.",
                         BOOLEAN_01, ("--no-build",)),
    "DRYZ_CACHE": Var("user", "The cache folder (below). Default `$XDG_CACHE_HOME/dryz`, else `~/.cache/dryz`.",
                      OUTPUT_FOLDER),
    "DRYZ_SDIST_DIR": Var("user", "A folder holding llama-cpp-python sdists, looked in before the cache and "
                                  "`pip download` (machines without PyPI).", INPUT_FOLDER),
    "DRYZ_INIT_DRY_ABI": Var("user", "`7` or `8`: the `llama_sampler_init_dry` ABI of a library whose ABI probes "
                                     "cannot tell; recorded as declared, refused if the probes contradict it.",
                             click.Choice(["7", "8"])),
    "DRYZ_CORPUS": Var("user", "The corpus whose documented classes a fuzz campaign does not count as new findings "
                               "(default: the project's).", INPUT_FOLDER),
    "DRYZ_ADAPTER_TIMEOUT": Var("user", "How long a `cmd:` adapter may take for one answer, a duration as `--time` "
                                        "takes it, e.g. `60` or `60s` (default 30 s).", Duration(0.001, 86400)),
    "DRYZ_DASK_TIMEOUT": Var("user", "How long to wait for a Dask scheduler (`--scheduler`), a duration as `--time` "
                                     "takes it, e.g. `2s` (default 20 s).", Duration(0.001, 86400)),
    "DRYZ_CLANG": Var("user", "The clang `fuzz --native` builds with (default: the newest clang on PATH).",
                      Parsed("program", _program, bad=("no-such-clang",))),
    "DRYZ_CLANGXX": Var("user", "The clang++ `fuzz --native` builds with.",
                        Parsed("program", _program, bad=("no-such-clang++",))),
    "DRYZ_FAULT": Var("control", "A planted fault for the harness's positive controls, as `dryz fuzz --fault` (the "
                                 "option wins): `off-by-one` (the reference overstates every L >= 2), `abort` (the "
                                 "process aborts where some L >= 3), `slow` (a 1.5 s pause). Entries made under it "
                                 "cannot be exported.", click.Choice(["off-by-one", "abort", "slow"]), ("--fault",)),
    "DRYZ_DRIVE": Var("control", "`ctypes`: drive libllama call by call through ctypes instead of the C call "
                                 "sequencer (`dryz/subject/_drive.c`); results are bit-identical (tested).",
                      click.Choice(["ctypes"])),
    "DRYZ_VOCAB_SAMPLER": Var("control", "`clone` (default) or `reset`: how a real-vocabulary case gets its sampler, "
                                         "as `dryz fuzz --sampler` (the option wins).",
                              click.Choice(["clone", "reset"]), ("--sampler",)),
    "DRYZ_INSTRUMENT": Var("control", "`0`: the fuzz harness adds no Python coverage (for benchmarks).", BOOLEAN_01),
    "DRYZ_FUZZ_FORKSERVER": Var("control", "`0`: a campaign starts every libFuzzer process afresh instead of forking "
                                           "them from one fork server.", BOOLEAN_01),
    "DRYZ_FUZZ_TARGET": Var("internal", "Set by a campaign in its processes: `traces` selects the trace target.",
                            click.Choice(["cases", "traces"])),
    "DRYZ_FUZZ_VOCAB": Var("internal", "Set by a vocabulary campaign in its processes: its vocabulary.", VOCAB),
    "DRYZ_FUZZ_BREAKERS": Var("internal", "Set by a vocabulary campaign in its processes: how it draws breaker sets.",
                              click.Choice(["default", "dict", "random"])),
    "DRYZ_FUZZ_RECORD": Var("internal", "Set by a campaign in its processes: the folder a finding is written to "
                                        "(as libFuzzer names a crash file), the fuzzing process going on.",
                            OUTPUT_FOLDER),
    "DRYZ_FUZZ_EXPLAINED": Var("internal", "Set by a campaign with fitted causes (`fuzz --fitted`): the folder an "
                                           "input they explain is written to, counted per cause.", OUTPUT_FOLDER),
    "DRYZ_CAUSES": Var("internal", "Set by a campaign with fitted causes (`fuzz --fitted`): the deviation models "
                                   "whose composition with llama.cpp explains a difference, which is then no finding.",
                       CAUSES),
    "DRYZ_FORKSERVER": Var("internal", "Set by a campaign while its fork server runs: the server's socket."),
    "DRYZ_ISOLATION_FDS": Var("internal", "Set for an isolation worker: the pipes it answers on.",
                              Parsed("descriptors", _fds, bad=("x",))),
    "DRYZ_ISOLATION_TIMEOUT": Var("internal", "Set for an isolation worker: seconds one case may take.",
                                  Duration(0.001, 86400)),
}


def env(name: str, default=None):
    """A DRYZ_* variable's value as its type reads it (unset or empty: default); InputError (one line, naming the
    variable) for a value its type refuses. Every place dryz reads a variable that has a type reads it here."""
    import os
    raw = os.environ.get(name)
    var = ENVIRONMENT[name]
    if not raw or var.type is None:
        return raw or default
    from .files import fail  # on use: keeps start-up fast
    try:
        return var.type.convert(raw, name if isinstance(var.type, (Checked, Bound)) else None, None)
    except click.BadParameter as e:  # click's own types (a Choice): their message, named by the variable
        fail(f"{name}: {e.message}")
    except click.UsageError as e:  # dryz's types: the message names the variable already
        fail(e.format_message())


def check_environment(argv=()) -> None:
    """Every DRYZ_* variable that is set, read with its type before any work (one line naming it, exit 2), except
    those whose option the command line gives (the option wins: the variable is not read)."""
    given = {a.split("=", 1)[0] for a in argv or ()}
    for name, var in ENVIRONMENT.items():
        if var.option and given & set(var.option):
            continue
        env(name)


# -- values checked together: a command's parsed options, before it runs -----------------------------------------

def check_together(ctx) -> None:
    """What no one option can say: no output names one of the command's input files (it would be overwritten
    before it is read, or after), and no two outputs name the same file. One line, exit 2."""
    import os
    outputs, inputs = {}, []
    for p in ctx.command.params:
        value = ctx.params.get(p.name)
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if v is None or not isinstance(v, str):
                continue
            if isinstance(p.type, Output) and not p.type.folder:
                real = os.path.realpath(v)
                if real in outputs:
                    raise click.UsageError(f"{_where(p, None)} {v}: also {_where(outputs[real], None)}: two results "
                                           "to one file")
                outputs[real] = p
            elif isinstance(p.type, Input) and not p.type.updated:
                inputs.append((p, v))
    for p, v in inputs:
        q = outputs.get(os.path.realpath(v))
        if q is not None:
            what = _where(p, None) or p.human_readable_name
            raise click.UsageError(f"{_where(q, None)} {v}: it is also this command's input ({what}): the result "
                                   "would overwrite it")


class Command(click.Command):
    """A dryz command: its options parsed (each checked by its type), then checked together (check_together),
    before it runs."""

    def parse_args(self, ctx, args):
        rest = super().parse_args(ctx, args)
        check_together(ctx)
        return rest


class Group(click.Group):
    """dryz's groups: their commands are Commands, their groups Groups."""
    command_class = Command
    group_class = type
