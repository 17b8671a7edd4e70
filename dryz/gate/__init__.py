"""`dryz gate`: every audit mode on one subject within a time budget, one verdict, and (with a base) what the
subject does differently from the base, for a pull request that touches DRY. The modes are records registered in
modes.py; plan.py splits the budget into two lanes; run.py runs them as dryz children (dryz.children) and reads
each one's JSON; changes.py judges the behaviour changes against the declarations; witnesses.py minimizes and
explains what failed; summary.py writes the Markdown; command.py is `dryz gate`. `dryz matrix` runs the same
records as its cells and `dryz mutate` runs plan() and run() per mutant."""

from .changes import change_class, declared, read_expect_file
from .modes import MODES, NAMES, ModeRecord
from .plan import LANES, MIN_SECONDS, Mode, mode, plan
from .result import Change, Finding, GateError, GateResult, ModeResult, from_json
from .run import run, run_mode
from .summary import markdown, report_inputs
from .witnesses import excerpt

__all__ = ["MODES", "NAMES", "LANES", "MIN_SECONDS", "Change", "Finding", "GateError", "GateResult", "Mode",
           "ModeRecord", "ModeResult", "change_class", "declared", "excerpt", "from_json", "markdown", "mode",
           "plan", "read_expect_file", "report_inputs", "run", "run_mode"]
