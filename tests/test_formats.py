"""Readers validate shapes: malformed files of every format dryz reads, generated from the format's own shape
(dryz.formats) with Hypothesis: a required field dropped, a field of the wrong type, a value that is not one of
its values, a file that is not an object. Every command that reads the format refuses each in one line naming
the file, exit 2, no traceback, nothing written and the file unchanged. The examples and real files of every
format pass their shapes (a shape that refused what dryz writes would be wrong)."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import ROOT, dryz
from dryz import formats as F
from dryz.cli import main

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
WRONG = ["x", 7, 1.5, True, None, [], {}, [1, "x"], {"a": 1}]


def targets(doc, t: F.T, path=()):
    """Every mutation the shape says must be refused: ("drop", path) for a required field present,
    ("retype", path, value) for a present field and a value not of its type, ("value", path) for a field with
    values."""
    out = []
    if t.kind == "object" and isinstance(doc, dict):
        for key, ft in t.fields.items():
            if key not in doc:
                continue
            p = path + (key,)
            if ft.required and not (ft.unless and any(u in doc for u in ft.unless.split(" or "))):
                out.append(("drop", p))
            out += [("retype", p, w) for w in WRONG if not _fits(w, ft)]
            if ft.values:
                out.append(("retype", p, "no-such-value"))
            out += targets(doc[key], ft, p)
    elif t.kind == "array" and isinstance(doc, list) and t.item is not None:
        for j, x in enumerate(doc[:3]):
            out += [("retype", path + (j,), w) for w in WRONG if not _fits(w, t.item)]
            out += targets(x, t.item, path + (j,))
    elif t.kind == "map" and isinstance(doc, dict) and t.item is not None:
        for key in list(doc)[:3]:
            out += [("retype", path + (key,), w) for w in WRONG if not _fits(w, t.item)]
            out += targets(doc[key], t.item, path + (key,))
    return out


def _fits(v, t: F.T) -> bool:
    return F.problem(v, F.T(t.kind, nullable=t.nullable, values=t.values)) is None


def mutated(doc, m):
    d = copy.deepcopy(doc)
    *head, last = m[1]
    parent = d
    for k in head:
        parent = parent[k]
    if m[0] == "drop":
        del parent[last]
    else:
        parent[last] = m[2]
    return d


def valid_documents(key: str, tmp: Path) -> list:
    """The format's example and real files of it."""
    docs = [F.FORMATS[key].example]
    real = {"corpus": sorted((ROOT / "corpus").rglob("*.json"))[:8],
            "conformance": [ROOT / "docs" / "results" / "conformance.json"],
            "kill-matrix": [ROOT / "dryz" / "mutate" / "kill-matrix-0.3.36.json"],
            "triage": [ROOT / "dryz" / "mutate" / "triage-0.3.36.json"]}.get(key, [])
    docs += [json.loads(p.read_text()) for p in real]
    if key in ("case", "trace"):
        docs += [e[key if key == "case" else "trace"] for e in (json.loads(p.read_text()) for p in
                                                                 sorted((ROOT / "corpus").rglob("*.json")))
                 if (key if key == "case" else "trace") in e][:4]
    return docs


# Every reader of every format: the command line that reads FILE (tmp: a folder for what a command may write).
READERS = {
    "case": [["check", "--no-isolate", "FILE"], ["explain", "FILE"], ["minimize", "FILE", "--corpus", "OUT"],
             ["properties", "--witness", "FILE"]],
    "trace": [["check", "--no-isolate", "FILE"], ["explain", "FILE"], ["minimize", "FILE", "--corpus", "OUT"]],
    "requests": [["check", "--no-isolate", "FILE"], ["explain", "FILE"], ["minimize", "FILE", "--corpus", "OUT"],
                 ["properties", "--witness", "FILE"]],
    "corpus": [["check", "--no-isolate", "FILE"], ["explain", "FILE"], ["minimize", "FILE", "--corpus", "OUT"],
               ["export", "FILE", "--as", "c"], ["properties", "--witness", "FILE"]],
    "certificate": [["report", "FILE"], ["merge", "FILE", "--json", "OUT/m.json"],
                    ["exhaustive", "-n", "1", "--resume", "FILE", "--json", "OUT/r.json"]],
    "fuzz": [["report", "DIR"]],
    "matrix": [["report", "FILE"]],
    "gate": [["report", "FILE"]],
    "conformance": [["report", "FILE"]],
    "kill-matrix": [["mutate", "--kill-order", "FILE", "--list"]],
    "triage": [["mutate", "--triage", "FILE", "--list"]],
}


def test_every_format_has_its_readers():
    assert set(READERS) == set(F.FORMATS)


def run(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(argv))
            code = 0
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def place(key: str, doc, tmp: Path) -> tuple[Path, Path]:
    """(the file, what the command line names: the file, or for a campaign its work folder)."""
    if key == "fuzz":
        d = tmp / "camp"
        d.mkdir(exist_ok=True)
        f = d / "summary.json"
        f.write_text(json.dumps(doc))
        return f, d
    f = tmp / f"{key}.json"
    f.write_text(json.dumps(doc))
    return f, f


def argv_for(cmd, named: Path, out: Path):
    return [str(named) if a in ("FILE", "DIR") else str(out) if a == "OUT" else
            a.replace("OUT/", str(out) + "/") for a in cmd]


@pytest.mark.parametrize("key", sorted(F.FORMATS))
def test_the_examples_and_real_files_pass_their_shapes(key, tmp_path):
    for doc in valid_documents(key, tmp_path):
        F.check_as(doc, key, "example")
    assert targets(F.FORMATS[key].example, F.shape(key)), key  # something to break


@pytest.mark.parametrize("key", sorted(F.FORMATS))
def test_malformed_files_of_every_format_are_one_line_exit_2(key, tmp_path_factory):
    shape = F.shape(key)
    docs = [d for d in valid_documents(key, None)]
    pool = [(d, m) for d in docs for m in targets(d, shape)] + [(None, ("whole", w)) for w in ("x", 7, [], None)]

    @SETTINGS
    @given(st.sampled_from(pool), st.sampled_from(READERS[key]))
    def refused(item, cmd):
        doc, m = item
        bad = m[1] if m[0] == "whole" else mutated(doc, m)
        assert F.problem(bad, shape) is not None or m[0] == "whole"  # the generator makes what the shape refuses
        tmp = tmp_path_factory.mktemp(key)
        f, named = place(key, bad, tmp)
        before = f.read_bytes()
        out = tmp / "out"
        code, stdout, stderr = run(argv_for(cmd, named, out))
        assert code == 2, (cmd, m, code, stdout[-300:], stderr[-300:])
        assert stderr.startswith("dryz: error: ") and stderr.count("\n") == 1, (cmd, m, stderr)
        assert "Traceback" not in stdout + stderr and str(f.name) in stderr, (cmd, m, stderr)
        assert f.read_bytes() == before and not out.exists()
        assert set(tmp.rglob("*")) == {f, named}, list(tmp.rglob("*"))
    refused()


def test_a_good_file_of_every_json_format_is_read(tmp_path):
    """The same readers take the examples (where a reader's work is cheap: report renders each result)."""
    for key in ("certificate", "matrix", "gate", "conformance", "fuzz"):
        f, named = place(key, F.FORMATS[key].example, tmp_path)
        code, out, err = run(["report", str(named)])
        assert code == 0 and "Traceback" not in err, (key, err)


def test_replay_reports_each_malformed_entry_and_goes_on(tmp_path):
    doc = F.FORMATS["corpus"].example
    ms = targets(doc, F.shape("corpus"))[:20]
    for j, m in enumerate(ms):
        (tmp_path / f"e{j}.json").write_text(json.dumps(mutated(doc, m)))
    code, out, err = run(["replay", str(tmp_path)])
    assert code == 2 and "Traceback" not in out + err
    assert out.count("INVALID") == len(ms) and f"0 changed, {len(ms)} invalid" in out


@SETTINGS
@given(st.lists(st.sampled_from(["crash", "semantic-change@window=-1", "promise-finte-penalty", "crash@window=7",
                                 "mismatch", "no-such-class", "# a comment", ""]), min_size=1, max_size=5))
def test_an_expect_file_is_read_line_by_line_before_any_work(lines):
    """gate --expect-file: each line checked as --expect-change checks it; the first bad one named with its line."""
    import tempfile
    good = {"crash", "semantic-change@window=-1", "mismatch", "# a comment", ""}
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "expect.txt"
        f.write_text("\n".join(lines) + "\n")
        code, out, err = run(["gate", "--expect-file", str(f), "--workdir", str(Path(d) / "w"), "--time", "10",
                              "--mode", "no-such-mode"])
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
        first_bad = next((k for k, ln in enumerate(lines, 1) if ln not in good), None)
        if first_bad is None:  # a good file: the run is refused for its --mode, after the file was read
            assert "--mode" in err, err
        else:
            assert f"{f} line {first_bad}:" in err, err
        assert sorted(p.name for p in Path(d).iterdir()) == ["expect.txt"]


def test_a_case_is_no_corpus_entry_for_export(tmp_path):
    f = tmp_path / "case.json"
    f.write_text(json.dumps(F.EXAMPLE_CASE))
    p = dryz("export", str(f), "--as", "c", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "a case, not a corpus entry" in p.stderr, p.stderr
