"""The space a `dryz exhaustive` command line selects: its configurations, alphabet, shard and workload
(select_space) and the executor's workers and Dask client (executor); --vocab's are in vocab_command. Bad options are one line and exit 2 (files.fail); nothing is
run here."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..files import fail
from ..case import CaseError
from ..config import CONFIG_NAMES, parameter_names, space_config, window_cap_names
from ..space import CanonicalError, case_count, expected_canonical, space_for
from ..symbols import MAX_ALPHABET
from .dask_exec import connect, SchedulerError, worker_threads

MAX_SPACE_CASES = 2_000_000_000      # cases in one symbol-space run


@dataclass
class Selection:
    alphabet: int | None   # None: every alphabet size at once (canonical)
    max_length: int
    specs: list            # config.SpaceConfig, one per configuration
    shard: tuple | None    # (I, N)
    canonical: bool
    work: int              # cases (canonical: with multiplicities) this run judges


def config_names(configs, default, parameters: bool, window_caps: bool, max_length: int) -> list[str]:
    """The configurations named (or the default), then --parameters' and --window-caps' additions, each once."""
    names = list(configs) or (default if not window_caps else [n for n in default if n != "window4"])
    if parameters:
        names += parameter_names([n for n in names if "/" not in n])
    if window_caps:
        names += window_cap_names(max_length)
    return list(dict.fromkeys(names))


def parse_shard(shard: str | None) -> tuple | None:
    if shard is None:
        return None
    try:
        i, n = (int(x) for x in shard.split("/"))
    except ValueError:
        fail(f"--shard must be I/N (e.g. 2/8), got {shard!r}")
    if not (n >= 1 and 1 <= i <= n):
        fail(f"--shard I/N needs 1 <= I <= N, got {shard!r}")
    return (i, n)


def select_space(alphabet, max_length, configs, canonical, all_alphabets, window_caps, parameters,
                 shard) -> Selection:
    if all_alphabets:
        if not canonical:
            fail("--all-alphabets needs canonical enumeration (drop --no-canonical)")
        alphabet = None
    default = ["base", "window4"] if all_alphabets else list(CONFIG_NAMES)
    specs = []
    for n in config_names(configs, default, parameters, window_caps, max_length):
        try:
            specs.append(space_config(n, alphabet or MAX_ALPHABET, max_length))
        except CaseError as e:
            fail(f"--config {n}: {e}")
        except ValueError:
            fail(f"unknown --config {n!r}; known: {', '.join(CONFIG_NAMES)}, windowW (W >= 1), "
                 "optionally NAME/allowedA/mM/bB")
    shard_spec = parse_shard(shard)
    if canonical:
        try:
            work = sum(expected_canonical(space_for(s, alphabet, max_length), max_length)["cases"] for s in specs)
        except CanonicalError as e:
            fail(str(e))
    else:
        work = case_count(alphabet, max_length) * len(specs)
    if shard_spec:
        work //= shard_spec[1]
    if work > MAX_SPACE_CASES:
        fail(f"space of {work:,} {'canonical ' if canonical else ''}cases is too large for one run "
             f"(limit {MAX_SPACE_CASES:,}); lower --alphabet or --max-length{' or use --shard' if canonical else ''}")
    return Selection(alphabet, max_length, specs, shard_spec, canonical, work)


def executor(scheduler, workers):
    """(workers, Dask client or None): the slice list is cut for the cluster's worker threads on a scheduler,
    else for local processes (at most 4 per core)."""
    client = None
    if scheduler is not None:
        try:
            client = connect(scheduler)
        except SchedulerError as e:
            fail(str(e))
        if workers is None:
            workers = worker_threads(client)
    if workers is None:
        workers = os.cpu_count() or 1
    limit = max(1, 4 * (os.cpu_count() or 1))
    if workers < 1 or (scheduler is None and workers > limit):
        if client is not None:
            client.close()
        fail(f"--jobs must be in 1..{limit} here (4 per core), got {workers}")
    return workers, client


TRACE_ALPHABET = 2   # the trace space's alphabet (dryz/enumerate/traces.py's default)
MAX_TRACE_EVENTS = 9  # --trace-events N: 1..9 (N=9: 2,492,781 traces per configuration, ~28 times N=7)


def validate_traces_option(n, shard, resume_path) -> None:
    if n is None:
        return
    if shard is not None or resume_path is not None:
        fail("--trace-events runs with a whole, fresh space (not with --shard or --resume)")
