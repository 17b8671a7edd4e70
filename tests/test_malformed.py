"""A generated set of malformed inputs, fed to every command that reads a file: each is refused in one line with
exit 2 (or, when the mutation happens to leave a valid case, judged: exit 0 or 1), never a traceback, never read
as something else."""

import json
import random

import pytest

from dryz.case import Case
from dryz.cli import main

VALID = Case(history=(0, 1, 0, 1), alphabet=2, penalty_last_n=8, breakers=("b",), multiplier=0.8).dumps()


def malformed() -> list[tuple[str, bytes]]:
    rng = random.Random(7)
    out = [("empty", b""), ("spaces", b"   \n"), ("null", b"null"), ("number", b"42"), ("string", b'"x"'),
           ("list", b"[1, 2]"), ("bom", b"\xef\xbb\xbf" + VALID.encode()), ("not utf-8", b'{"\xff": 1}'),
           ("deep", b"[" * 50000 + b"]" * 50000), ("deep object", b'{"a":' * 30000 + b"1" + b"}" * 30000),
           ("huge int", b'{"history": [' + b"9" * 5000 + b'], "alphabet": 2, "penalty_last_n": 8}'),
           ("trailing comma", VALID[:-1].encode() + b", }"), ("typo key", VALID.replace("history", "histroy", 1).encode())]
    for cut in range(1, len(VALID), 9):
        out.append((f"truncated at {cut}", VALID[:cut].encode()))
    d = json.loads(VALID)
    for key in ("history", "alphabet", "penalty_last_n", "breakers", "multiplier", "base", "allowed_length",
                "n_ctx_train", "sorted", "candidates"):
        for bad in ("x", None, [], {}, 1.5, -(10 ** 30), 10 ** 400, True, "-inf", [["a", 1]]):
            e = dict(d)
            e[key] = bad
            out.append((f"{key}={bad!r}"[:40], json.dumps(e).encode()))
    for i in range(40):
        b = bytearray(VALID.encode())
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.choice(b'{}[],:"0123456789-.eE \\nulltruefalse\x00\xff')
        out.append((f"flipped {i}", bytes(b)))
    return out


CASES = malformed()


def run(capsys, *argv) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    out, err = capsys.readouterr()
    return e.value.code, out, err


@pytest.mark.parametrize("command", [["check", "--no-isolate"], ["minimize"], ["explain"], ["report"],
                                     ["merge", "--json", "MERGED"], ["exhaustive", "-n", "2", "--resume"]])
def test_every_command_refuses_malformed_input_in_one_line(tmp_path, capsys, command, lib):
    counts = {0: 0, 1: 0, 2: 0}
    for i, (name, data) in enumerate(CASES):
        f = tmp_path / f"in{i}.json"
        f.write_bytes(data)
        argv = [a.replace("MERGED", str(tmp_path / "m.json")) for a in command] + [str(f)]
        if command[0] == "minimize":
            argv += ["--corpus", str(tmp_path / "c")]
        if command[0] == "exhaustive":
            argv += ["--json", str(tmp_path / "r.json")]
        code, out, err = run(capsys, *argv)
        assert "Traceback" not in err + out, (command, name, err)
        assert code in (0, 1, 2), (command, name, code)
        if code == 2:
            assert err.startswith("dryz: error:") and err.count("\n") == 1, (command, name, err)
        counts[code] += 1
    assert counts[2] >= len(CASES) * 0.8  # nearly all are refused; a few mutations leave a valid case


def test_replay_reports_each_malformed_entry_and_goes_on(tmp_path, capsys, lib):
    for i, (_, data) in enumerate(CASES[:30]):
        (tmp_path / f"e{i}.json").write_bytes(data)
    code, out, err = run(capsys, "replay", str(tmp_path))
    assert code == 2 and "Traceback" not in out + err
    assert out.count("INVALID") == 30 and "0 changed, 30 invalid" in out


# -- JSON that is not UTF-8: bad input, never fuzz bytes -------------------------------------------------------------

TRACE = json.dumps({"schema": "dryz.trace/1", "alphabet": 2, "penalty_last_n": 4,
                    "events": [["accept", [0, 0]], ["apply", None]]})
NOT_UTF8 = [  # (file name, bytes, what the one line must say)
    ("utf16le-bom.json", b"\xff\xfe" + VALID.encode("utf-16-le"), "UTF-16 (little-endian, with a byte-order mark)"),
    ("utf16be-bom.json", b"\xfe\xff" + VALID.encode("utf-16-be"), "UTF-16 (big-endian, with a byte-order mark)"),
    ("utf16le.json", VALID.encode("utf-16-le"), "UTF-16 (little-endian) text"),
    ("utf16be.json", VALID.encode("utf-16-be"), "UTF-16 (big-endian) text"),
    ("utf32.json", VALID.encode("utf-32"), "UTF-32 (little-endian, with a byte-order mark)"),
    ("trace-utf16.json", b"\xff\xfe" + TRACE.encode("utf-16-le"), "UTF-16 (little-endian, with a byte-order mark)"),
    ("latin1.json", VALID.replace("}", ', "note": "caf\u00e9"}').encode("latin-1"), "not UTF-8 (byte"),
    ("binary.json", bytes(range(128, 256)), "not UTF-8 (byte 0)"),
    ("named-anyhow", bytes(range(128, 256)), "not UTF-8 (byte 0)"),  # not a libFuzzer artifact name: not bytes
]


@pytest.mark.parametrize("command", [["check", "--no-isolate"], ["check", "--no-isolate", "--trace"], ["explain"],
                                     ["minimize"], ["report"], ["merge", "--json", "MERGED"],
                                     ["exhaustive", "-n", "2", "--resume"]])
def test_json_that_is_not_utf8_is_refused_in_one_line(tmp_path, capsys, command, lib):
    for i, (name, data, said) in enumerate(NOT_UTF8):
        f = tmp_path / f"{i}-{name}"
        f.write_bytes(data)
        argv = [a.replace("MERGED", str(tmp_path / "m.json")) for a in command] + [str(f)]
        if command[0] == "minimize":
            argv += ["--corpus", str(tmp_path / "c")]
        if command[0] == "exhaustive":
            argv += ["--json", str(tmp_path / "r.json")]
        code, out, err = run(capsys, *argv)
        assert code == 2 and err.startswith("dryz: error:") and err.count("\n") == 1, (command, name, code, err)
        assert said in err and str(f) in err and "Traceback" not in out + err and not (tmp_path / "c").exists()


def test_replay_refuses_entries_that_are_not_utf8(tmp_path, capsys, lib):
    for i, (name, data, said) in enumerate(NOT_UTF8):
        (tmp_path / f"e{i}.json").write_bytes(data)
    code, out, err = run(capsys, "replay", str(tmp_path))
    assert code == 2 and "Traceback" not in out + err
    assert out.count("INVALID") == len(NOT_UTF8) and "0 changed" in out
    assert out.count("not UTF-8") == out.count("INVALID") and out.count("UTF-16") == 5


def test_fuzz_bytes_only_for_crash_files_and_as_bytes(tmp_path, capsys, lib):
    """The same non-UTF-8 bytes are a fuzz input (decoded as the harness decodes them, judged) when named as
    libFuzzer names a crash file, or with --as bytes; under any other name they are refused (above)."""
    data = b"\xff\xfe" + VALID.encode("utf-16-le")
    crash = tmp_path / "crash-0123456789abcdef0123456789abcdef01234567"
    crash.write_bytes(data)
    other = tmp_path / "input.json"
    other.write_bytes(data)
    for argv in (["check", "--no-isolate", str(crash)], ["check", "--no-isolate", "--as", "bytes", str(other)]):
        code, out, err = run(capsys, *argv)
        assert code in (0, 1) and json.loads(out)["input"] == "fuzz input", (argv, err)
    code, out, err = run(capsys, "check", "--no-isolate", "--trace", str(crash))
    assert code in (0, 1) and json.loads(out)["input"] == "trace fuzz input", err
    code, out, err = run(capsys, "check", "--no-isolate", "--as", "json", str(crash))
    assert code == 2 and "UTF-16" in err and err.count("\n") == 1
