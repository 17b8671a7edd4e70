"""The fuzz target's logic (the harness in fuzz/ only wires it to atheris)."""

from __future__ import annotations

import os

from ..corpus import known_classes
from ..verdict import AGREE, is_finding
from ..judge import check, check_answer
from ..subject.answers import Unsupported
from ..decode import CAMPAIGN_VOCAB as VOCAB, input_decoder
from ..decode.traces import decode_trace
from ..subject import SubjectError
from ..subject.registry import opened_here, selected_spec
from ..trace_check import check_trace

decode = input_decoder(None, None)  # the symbol decoder until load_subject picks the campaign's


class Finding(Exception):
    """A verdict that is neither agreement nor a documented class: libFuzzer keeps the input."""


# Known: the corpus's classes, and the limitations the source documents itself (never findings, verdict.is_finding).
KNOWN = known_classes()


def is_new_finding(klass: str) -> bool:
    """What a campaign keeps and its re-check confirms: a class that is neither agreement nor known."""
    return klass != AGREE and klass not in KNOWN and is_finding(klass)  # (a declared deviation: not a finding)

SUBJECT = None  # this fuzz job's subject: the campaign passes its spec (DRYZ_SUBJECT); opened by load_subject


def load_subject() -> None:
    """Open the campaign's subject and make the decoder (the vocabulary, if any, loaded and its snippets
    tokenized) before libFuzzer starts."""
    global decode, SUBJECT
    SUBJECT = opened_here(selected_spec())  # an engine adapter in this process where it can (no pipe per input)
    decode = input_decoder(SUBJECT)


def _subject():
    """The job's subject: opened before libFuzzer starts (load_subject); opened here for a caller that did not."""
    if SUBJECT is None:
        load_subject()
    return SUBJECT


def warm() -> None:
    """Do once what a process's first inputs would do: import what the target imports on first use and, over a
    real vocabulary, initialize every configuration's sampler, restart sequences and text model
    (decode_vocab.VocabDecoder.warm). The fork server (forkserver.py) runs this before it forks any job."""
    if VOCAB is not None:
        decode.__self__.warm(lambda case: check(case, _subject()))
    elif entry_point() is test_one_trace:
        test_one_trace(b"\x00\x01\x00\x00\x00\x00")
    else:
        test_one_input(b"")


# Findings recorded in process (DRYZ_FUZZ_RECORD: the artifacts folder): a finding is written there as libFuzzer
# names a crash file (crash-SHA1 of the input) and the job goes on, so no fuzzing process dies per finding (an engine
# whose every other input differs would spend the campaign restarting jobs); the campaign re-checks the files. A
# finding the subject's fitted causes explain (DRYZ_CAUSES: deviation models, dryz.causes) is not a finding: its case
# and answer go to DRYZ_FUZZ_EXPLAINED (one file per distinct input), which the campaign counts per cause.
RECORD = os.environ.get("DRYZ_FUZZ_RECORD") or None
EXPLAINED = os.environ.get("DRYZ_FUZZ_EXPLAINED") or None
CAUSES = tuple(m for m in os.environ.get("DRYZ_CAUSES", "").split(",") if m)


KEEP = 20_000  # files one job writes into a folder; past it, the inputs are counted (OVERFLOW), not kept
# Explained inputs a job keeps as files: the campaign counts them per cause on a sample of at most BY_CAUSE_SAMPLE
# (dryz.fuzz.campaign), so a job keeps its first EXPLAINED_KEEP (a job starts with the corpus's seeds: the same
# inputs in every job, one file each) and counts the rest; writing every one (its case and answer as JSON) cost an
# engine's campaign a tenth of its time.
EXPLAINED_KEEP = 250
OVERFLOW = "overflow-{pid}.count"  # a job's count of the inputs it did not keep, rewritten every 100
_kept: dict = {}


def _keep(folder: str, name: str, text, keep: int = KEEP) -> None:
    """Write a file once (a distinct input: its name is its hash); a second writer of the same name loses. Past
    `keep` files from this job, the input is counted in the folder's overflow file instead (text: its content, or
    a call that makes it, made only when it is written)."""
    n = _kept.get(folder, 0)
    if n >= keep:
        _kept[folder] = n + 1
        if (n + 1 - keep) % 100 == 1:
            with open(os.path.join(folder, OVERFLOW.format(pid=os.getpid())), "w") as f:
                f.write(str(n + 1 - keep))
        return
    try:
        fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    _kept[folder] = n + 1
    if callable(text):
        text = text()
    with os.fdopen(fd, "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode())


def found(data: bytes, message, case=None, answer=None) -> None:
    """A new finding: explained by the fitted causes (kept aside, counted), recorded in process, or raised for
    libFuzzer to keep (message: a call that makes the finding's text, made only then)."""
    import hashlib  # on use: a finding
    import json  # on use: a finding
    sha = hashlib.sha1(data).hexdigest()
    if CAUSES and case is not None and answer is not None and EXPLAINED:
        from ..causes import answer_json, explains  # on use: a campaign with fitted causes
        subject = _subject()
        if explains(case, answer, CAUSES, bool(subject.caps.sorted_flag), subject.abi):
            _keep(EXPLAINED, f"{sha}.json", lambda: json.dumps({"case": case.to_json(), "answer": answer_json(
                answer)}), EXPLAINED_KEEP)
            return
    if RECORD:
        _keep(RECORD, f"crash-{sha}", data)
        return
    raise Finding(message())


def test_one_input(data: bytes) -> None:
    case = decode(data)
    try:
        v, out = check_answer(case, _subject())
    except Unsupported:  # a case this subject cannot express (its capabilities): not judged
        return
    if is_new_finding(v.klass):
        found(data, lambda: f"{v.klass}: {v.detail}\n{case.dumps()}", case, out)


def test_one_trace(data: bytes) -> None:
    """The trace target (dryz fuzz --traces): bytes -> Trace (dryz.decode.traces.decode_trace) -> check_trace."""
    trace = decode_trace(data)
    try:
        v = check_trace(trace, _subject())
    except SubjectError:  # a configuration the old ABI's driver refuses (it would throw): not judged as a trace
        return
    if is_new_finding(v.klass):
        found(data, lambda: f"{v.klass} at apply {v.first_bad_apply}: {trace.spelled()[:300]}\n{trace.dumps()}")


def entry_point():
    """The test_one_input the campaign asked for (DRYZ_FUZZ_TARGET: cases, the default, or traces)."""
    return test_one_trace if os.environ.get("DRYZ_FUZZ_TARGET") == "traces" else test_one_input
