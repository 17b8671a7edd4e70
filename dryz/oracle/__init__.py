"""The oracles: match lengths A and B (lengths.py), the shipped model (shipped.py: Steps 1-4 as the source
writes them), the promised Step 1 (promised.py), restart sequences from breaker strings over the symbol
vocabulary (restarts.py) and over a real vocabulary (restarts_vocab.py), the text-level promise
(promise_text.py), the sampler's state across a trace of calls (trace_model.py), the reference design
(reference.py). None of them sees a subject: dryz.check compares the subject with them."""
