"""Conformance: llama.cpp's DRY semantics, property by property, on every subject at once.

properties  the columns: each semantic property of DRY as a bounded space of probes, shortest first
row         one subject's row (`dryz properties`): every property's probes judged on it, a cell per property;
            a campaign's witnesses attributed to the property whose deviation model reproduces them
matrix      `dryz conformance`: per subject, in child processes, the campaigns (the certificate space, the restart
            sweep, a fuzz campaign) and its row; every differing cell's witness minimized; the matrix as Markdown
            and JSON (HTML through `dryz report`)
"""
