"""The oracles: match lengths A and B (lengths.py), the shipped model (shipped.py: Steps 1-4 as the source
writes them), the promised Step 1 (promised.py), restart sequences from breaker strings (restarts.py), the
reference design (reference.py). None of them sees a subject: dryz.check compares the subject with them."""
