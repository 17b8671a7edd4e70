"""Oracles beyond the single-case ones in dryz/model.py: the sampler's state across a trace (trace_model.py)."""
