"""The project's own promises: README's commands are what CI runs; the layout reads as the pipeline."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_commands():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Set-up\n.*?```sh\n(.*?)```", text, re.S).group(1)
    return [ln.strip() for ln in block.splitlines() if ln.strip() and not ln.startswith("#")]


def test_readme_has_two_setup_commands_and_ci_runs_the_test_one():
    cmds = readme_commands()
    assert len(cmds) == 2
    assert "dryz exhaustive" in cmds[0]
    test_cmd = cmds[1].split("&&")[-1].strip()
    assert "pytest" in test_cmd
    assert test_cmd in (ROOT / ".ci" / "run").read_text()


def test_top_level_layout():
    for name in ("dryz", "fuzz", "corpus", "minimize", "PREREG.md", "README.md", "LICENSE", "pyproject.toml",
                 ".ci/run", "bench", "tests"):
        assert (ROOT / name).exists(), name
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert 'llama-cpp-python==0.3.36' in (ROOT / "pyproject.toml").read_text()


# The layers, bottom up. A module may import (at its top or inside a function) modules of its own layer and of the
# layers below it, never one above; and no set of modules imports itself in a circle.
LAYERS = (
    ("dryz", "minimize", "dryz.errors", "dryz.params", "dryz.symbols", "dryz.files", "dryz.output", "dryz.formats",
     "dryz.environment", "dryz.gate.result"),  # gate.result: the gate's result as plain data (formats reads it)
    # ^ the ground (formats: the shapes of the files dryz reads)
    ("dryz.case", "dryz.trace", "dryz.trace_space", "dryz.requests"),  # what a case, a trace, a sequence are
    ("dryz.oracle",),                                       # the pure models: they never run a subject
    ("dryz.subject",),                                      # what is audited, and how it runs
    ("dryz.verdict", "dryz.vocab_cases", "dryz.config", "dryz.space", "dryz.decode", "dryz.children"),
    ("dryz.check", "dryz.causes"),                          # check_batch: the one comparison; the causes fitted
    ("dryz.judge", "dryz.judge_served", "dryz.trace_check", "dryz.requests_check", "dryz.differential",
     "dryz.explain"),
    # ^ a subject driven and judged
    ("dryz.corpus",),
    ("dryz.shrink", "dryz.inputs", "dryz.render", "dryz.export"),  # export: an entry as a test (no subject run)
    ("dryz.enumerate", "dryz.fuzz", "dryz.compare", "dryz.shrink_command", "dryz.explain_command"),  # the modes
    ("dryz.gate",),
    ("dryz.matrix", "dryz.mutate", "dryz.conformance"),
    ("dryz.report", "dryz.issue"),  # issue: another engine's finding as its maintainers' report
    ("dryz.cli", "dryz.options", "dryz.__main__"),  # the command line
    ("dryz.docs",),  # the documentation generated from the command line and the registries
)


def _modules() -> dict[str, Path]:
    """Every module of dryz and minimize, by its dotted name (a package by its __init__; the C extension too)."""
    out = {}
    for p in sorted(list((ROOT / "dryz").rglob("*.py")) + list((ROOT / "minimize").rglob("*.py"))
                    + list((ROOT / "dryz").rglob("*.c"))):
        parts = p.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _import_graph() -> dict[str, set[str]]:
    """module -> the modules it imports: every import statement, at the top or inside a function."""
    import ast
    mods = _modules()

    def resolve(name: str) -> str:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for m, p in mods.items():
        if p.suffix != ".py":
            continue
        here = m.split(".") if p.name == "__init__.py" else m.split(".")[:-1]
        out = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else (node.module or "")
                for a in node.names:  # `from . import x` imports the module x; `from .m import f` the module m
                    out.add(resolve(f"{base}.{a.name}") if f"{base}.{a.name}" in mods else resolve(base))
            elif isinstance(node, ast.Import):
                out.update(resolve(a.name) for a in node.names)
        graph[m] = {x for x in out if x and x != m}
    return graph


def _layer(module: str) -> int:
    best = max(((len(prefix), i) for i, layer in enumerate(LAYERS) for prefix in layer  # "dryz": its __init__ only
                if module == prefix or prefix != "dryz" and module.startswith(prefix + ".")), default=None)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[1]


def test_every_import_stays_in_its_layer_or_below():
    """Every module is in a layer, and no import (module-level or inside a function) reaches a layer above."""
    up = sorted(f"{a} -> {b}" for a, bs in _import_graph().items() for b in bs if _layer(b) > _layer(a))
    assert not up, up


def _circles(graph) -> list[list[str]]:
    """The strongly connected sets of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    """No modules import each other in a circle, counting imports inside functions."""
    assert _circles(_import_graph()) == []


def test_the_layer_and_circle_checks_fail_on_a_planted_import():
    """The checks above see an import inside a function: one from the subject's isolation worker up to the judge
    (which imports it) is both a layer violation and a circle; the graph holds the imports inside functions."""
    graph = _import_graph()
    assert "dryz.explain_command" in graph["dryz.cli"]  # cli imports it only inside functions
    graph["dryz.subject.isolation"] = graph["dryz.subject.isolation"] | {"dryz.judge"}
    assert _layer("dryz.judge") > _layer("dryz.subject.isolation")
    assert ["dryz.judge", "dryz.subject.isolation"] in _circles(graph)


def test_imports_inside_functions_say_why():
    """An import of dryz's own inside a function stays only to keep start-up fast (or, in the fuzz harness, to
    import after atheris instruments the oracles), and says so on its line."""
    import ast
    bare = []
    for m, p in _modules().items():
        if p.suffix != ".py":
            continue
        lines = p.read_text().splitlines()
        for f in ast.walk(ast.parse(p.read_text())):
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in ast.walk(f):
                    if isinstance(n, ast.ImportFrom) and (n.level or (n.module or "").startswith(("dryz", "minimize"))) \
                            and "# on use" not in lines[n.end_lineno - 1]:
                        bare.append(f"{p.relative_to(ROOT)}:{n.lineno}")
    assert not bare, bare


def test_the_two_oracles_share_no_code():
    """Oracles A and B must agree first: a helper both use would fool both the same way. Neither module's
    functions use a name the other defines (B lives in lengths_b.py, A in lengths.py)."""
    import ast
    defined = {}
    for name in ("lengths", "lengths_b"):
        tree = ast.parse((ROOT / "dryz" / "oracle" / f"{name}.py").read_text())
        defined[name] = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | \
            {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    graph = _import_graph()
    assert "dryz.oracle.lengths" not in graph["dryz.oracle.lengths_b"]
    assert "dryz.oracle.lengths_b" not in graph["dryz.oracle.lengths"]


def test_cli_is_arguments_and_printing():
    """cli.py parses options and calls each mode's command: at most ~600 lines, and no mode's error mapped there
    one by one (main() ends every DryzError the same way)."""
    text = (ROOT / "dryz" / "cli.py").read_text()
    assert len(text.splitlines()) <= 600
    allowed = {"OSError", "TypeError", "ValueError", "KeyError", "OverflowError", "BrokenPipeError",
               "NothingToMinimize"}
    head = text.split("\ndef main(")[0]
    caught = re.findall(r"except\s*\(?([\w.,\s]+?)\)?(?:\s+as\s+\w+)?:", head)
    names = [c.rsplit(".", 1)[-1] for group in caught for c in re.split(r",\s*", group.strip())]
    assert not [c for c in names if c not in allowed], names
    assert "isinstance(e" not in head  # nor mapped inside a broad handler


# Exceptions that are not "one line and exit 2": control flow inside a mode (interrupted runs, a finding the
# harness raises to libFuzzer, a minimizer with nothing to do, a dying child), click's own, and the request
# rejections of llama-server's model (an oracle's value, never raised to a command).
NOT_EXIT_TWO = {"dryz.enumerate.exhaustive.ExhaustiveInterrupted", "dryz.enumerate.run.Interrupted",
                "dryz.enumerate.traces.TraceSpaceInterrupted", "dryz.fuzz.campaign._Terminated",
                "dryz.fuzz.target.Finding", "dryz.shrink.NothingToMinimize",
                "dryz.subject.command._Gone", "dryz.subject.answers.SubjectCrashed", "dryz.subject.server.ServerDied",
                "dryz.oracle.served.RequestError",
                # an engine adapter's own control flow: each becomes an answer to dryz (not judged, a refusal, a crash)
                "dryz.subject.engines.serve.NotExpressible", "dryz.subject.engines.serve.Refusal",
                "dryz.subject.engines.serve.EngineRaised"}


def test_every_error_a_command_can_meet_is_a_dryz_error():
    """Every exception class dryz defines ends a command as one line and exit 2 (dryz.errors.DryzError), unless
    it is named in NOT_EXIT_TWO with its reason: a new module's error cannot fall through to 'internal error'."""
    import importlib
    import inspect
    import pkgutil

    import dryz
    from dryz.errors import DryzError
    missing = []
    for m in pkgutil.walk_packages(dryz.__path__, "dryz."):
        if m.name in ("dryz.__main__", "dryz.fuzz.harness"):
            continue
        mod = importlib.import_module(m.name)
        for name, c in inspect.getmembers(mod, inspect.isclass):
            if c.__module__ == mod.__name__ and issubclass(c, BaseException) \
                    and f"{m.name}.{name}" not in NOT_EXIT_TWO and not issubclass(c, DryzError):
                missing.append(f"{m.name}.{name}")
    assert not missing, missing


def test_every_package_is_installed():
    """pyproject.toml lists every package of dryz (an installed dryz imports each one: tests/test_install.py)."""
    import tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "dryz").rglob("__init__.py")}
    assert found - listed == set(), found - listed
