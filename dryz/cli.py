"""The dryz command line. Errors are one line on stderr: exit 2 for usage or harness errors."""

from __future__ import annotations

import os
import sys
import time

import click

from . import __version__

EXIT_OK, EXIT_FINDING, EXIT_ERROR = 0, 1, 2
MAX_SPACE_CASES = 2_000_000_000


class Failure(click.ClickException):
    exit_code = EXIT_ERROR


def _fail(msg: str):
    raise Failure(msg)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dryz")
def cli():
    """Audit llama.cpp's DRY sampler against independent oracles."""


@cli.command()
@click.option("-k", "--alphabet", type=int, default=3, show_default=True, help="Number of symbols.")
@click.option("-n", "--max-length", type=int, default=11, show_default=True, help="Longest history.")
@click.option("-c", "--config", "configs", multiple=True, metavar="NAME",
              help="Configuration to run (base, window4, breaker); repeatable. Default: all three.")
@click.option("--json", "json_path", default="results/main.json", show_default=True,
              help="Where to write the results JSON.")
@click.option("-j", "--workers", type=int, default=None,
              help="Processes to run in parallel.  [default: all cores]")
@click.option("--progress/--no-progress", default=True, help="Progress bar on stderr (after 1 s).")
def exhaustive(alphabet, max_length, configs, json_path, workers, progress):
    """Certify every history of length 1..N over k symbols, every symbol a candidate."""
    from .exhaustive import CONFIG_NAMES, HarnessError, case_count, space_config
    from .symbols import MAX_ALPHABET

    if not 1 <= alphabet <= MAX_ALPHABET:
        _fail(f"--alphabet must be in 1..{MAX_ALPHABET}, got {alphabet}")
    if max_length < 1:
        _fail(f"--max-length must be at least 1, got {max_length}")
    names = list(dict.fromkeys(configs)) or list(CONFIG_NAMES)
    for n in names:
        if n not in CONFIG_NAMES:
            _fail(f"unknown --config {n!r}; known: {', '.join(CONFIG_NAMES)}")
    per_config = case_count(alphabet, max_length)
    if per_config * len(names) > MAX_SPACE_CASES:
        _fail(f"space of {per_config * len(names):,} cases is too large for one run "
              f"(limit {MAX_SPACE_CASES:,}); lower --alphabet or --max-length")
    if workers is None:
        workers = os.cpu_count() or 1
    if workers < 1:
        _fail(f"--workers must be at least 1, got {workers}")
    specs = [space_config(n, alphabet, max_length) for n in names]
    try:
        result = run_exhaustive(alphabet, max_length, specs, json_path, progress, workers)
    except HarnessError as e:
        _fail(f"harness error: {e}")
    from .report import certificate_text
    click.echo(certificate_text(result))
    click.echo(f"results   {json_path}")
    for c in result["configs"]:
        for ex in c["examples"]:
            from .case import Case
            click.echo(f"{ex['kind']} ({c['name']}): {Case.from_json(ex['case']).dumps()}")
    if result["verdict"] == "void":
        click.echo("dryz: error: a control did not show what it must; the run is void", err=True)
        sys.exit(EXIT_ERROR)
    sys.exit(EXIT_OK if result["verdict"] == "certified" else EXIT_FINDING)


def run_exhaustive(alphabet, max_length, specs, json_path, progress=True, workers=1) -> dict:
    from .check import check, subject
    from .exhaustive import case_count, multiplier_zero_control, periodic_control, run_configs
    from .report import Progress, environment, write_json

    t0 = time.perf_counter()
    lib = subject()
    ident = lib.identity
    bar = Progress(sum(alphabet ** n for n in range(1, max_length + 1)) * len(specs),
                   "histories", enabled=progress)
    results = run_configs(lib, alphabet, max_length, specs, workers, bar)
    bar.close()
    periodic = periodic_control(check)
    mz = multiplier_zero_control(lib, alphabet, min(max_length, 7), specs)
    totals = {k: sum(getattr(r, k) for r in results) for k in ("cases", "mismatches", "oracle_disagreements")}
    flagged = sum(r.off_by_one_flagged for r in results)
    expected_cases = case_count(alphabet, max_length) * len(specs)
    controls_ok = periodic["passed"] and flagged > 0 and mz["passed"] and totals["cases"] == expected_cases
    if not controls_ok:
        verdict = "void"
    elif totals["mismatches"] or totals["oracle_disagreements"]:
        verdict = "mismatch"
    else:
        verdict = "certified"
    result = {
        "tool": "dryz exhaustive",
        "verdict": verdict,
        "subject": ident,
        "space": {"alphabet": alphabet, "symbols": __import__("dryz.symbols").symbols.SYMBOLS[:alphabet],
                  "min_length": 1, "max_length": max_length, "candidates": "every symbol, logit 0",
                  "configs": [s.to_json() for s in specs], "expected_cases": expected_cases},
        "configs": [r.to_json() for r in results],
        "totals": totals,
        "controls": {"periodic": periodic,
                     "off_by_one": {"flagged": flagged, "passed": flagged > 0},
                     "multiplier_zero": mz},
        "environment": dict(environment(), workers=workers),
        "python": sys.version.split()[0],
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    result["wall_seconds"] = round(time.perf_counter() - t0, 3)
    write_json(json_path, result)
    return result


def main(argv=None):
    """Entry point: click's usage errors become one-line messages with exit 2."""
    try:
        cli.main(args=argv, prog_name="dryz", standalone_mode=False)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        click.echo(f"dryz: error: {e.format_message()}", err=True)
        sys.exit(EXIT_ERROR)
    except click.exceptions.Abort:
        click.echo("dryz: aborted", err=True)
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt:
        click.echo("dryz: interrupted", err=True)
        sys.exit(130)
    sys.exit(EXIT_OK)


if __name__ == "__main__":
    main()
