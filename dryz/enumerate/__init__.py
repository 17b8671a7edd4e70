"""Exhaustive enumeration: run.py (slices, workers, the tally), canonical.py (equality patterns), controls,
certificate.py (the verdict of a run and merging shards), dask_exec.py (Dask executor), restarts.py (the
multi-token restart sweep)."""
