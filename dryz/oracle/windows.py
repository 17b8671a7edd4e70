"""How windows reach the match-length oracles (lengths.py: A, lengths_b.py: B): a batch is an (N, w) integer array
of equal-length windows, oldest token first. Conventions only (no code): both oracles read them, and each
implements them on its own.

Token ids are non-negative. In a ragged batch (shipped.shipped_lengths_ragged) a window shorter than the batch's is
right-aligned after PAD entries, which equal no token: the position-keyed match stops at a PAD (it meets the
window's first token's predecessor first), and no occurrence of a suffix of w + [z] can extend into one (its tokens
would have to equal the window's). Both oracles compute every window's M as they do for the window alone; their
one-window layouts never see PAD. Batches up to ROWS_MAX windows take the row layouts, larger ones the column
layouts.
"""

PAD = -1
ROWS_MAX = 256
