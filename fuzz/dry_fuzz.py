#!/usr/bin/env python3
"""The atheris harness (dryz/fuzz/harness.py), runnable from a checkout with libFuzzer flags:
fuzz/dry_fuzz.py -runs=0 DIR, or -max_total_time=40 DIR. `dryz fuzz` runs the same harness."""

from dryz.fuzz.harness import main

if __name__ == "__main__":
    main()
