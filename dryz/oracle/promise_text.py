"""A text-level oracle for sequence breakers: what the source promises, against what the library does.

The promise. llama.cpp documents a sequence breaker as a string that stops a repetition wherever it occurs in
the generated text (llama-sampler.cpp: restart sequences "limit the maximum repetition length"; the server
docs: "Specify which strings act as sequence breakers for DRY"). Stated on text, for a window of tokens
t_0 .. t_{n-1}:

* The text is the concatenation of the tokens' pieces as a streaming client prints them,
  `llama_token_to_piece(t, lstrip 0, special true)` (bytes; no leading-space removal, no space cleaning), so
  token t_k owns the byte span [a_k, b_k) of the text.
* An occurrence of a breaker b is any byte offset p with text[p:p+len(b)] == b (the whole breaker as the
  user wrote it, UTF-8). It *ends in* token k when its last byte p + len(b) - 1 lies in [a_k, b_k).
* "After the breaker" means after the token in which the occurrence ends: a token that holds the breaker's
  last byte (and perhaps more text after it) is part of the breaker, the tokens after it are not. So the
  promised rep_limit is n - 1 - k for the latest-ending occurrence of any breaker, and n when there is none.
  (For a single-token breaker this is exactly the shipped rule rep_limit = i.)

The library is observed through the same probe as the construction comparison (vocab_probes): the history X z X
with X the window and z a token outside every restart sequence: L_z = min(|X|, rep_limit), so the observed
rep_limit is exact below |X| and ">= |X|" otherwise; the promise is compared clipped the same way.

Histories are made the way a model emits text: real texts (prose, code, chat transcripts with their template
markers, non-ASCII; `TEXTS`) tokenized with the vocabulary, template markers parsed as special tokens (a chat
model emits `<|im_end|>` as one token), windows of at most 60 tokens ending 0..3 tokens after each place a
breaker ends, plus every 7th position.

Classes of disagreement (library rep_limit vs promised), each explained from the source:

* `documented-contained-restart`: a complete restart sequence ends where the promise does, but the scan of
  Step 1 stops at a later *head* whose (shorter) sequence ends earlier. The source's own comment: "in the
  case of a short sequence contained in a longer one, this might fail to find the smallest value for
  rep_limit" ('ni' in 'amniotic').
* `documented-breaker-truncated`: the breaker is longer than 40 bytes; init_dry cuts it
  ("truncating DRY sequence breaker to 40 characters" - bytes, in fact) and the library cuts where the
  40-byte prefix ends (earlier than, or without, the full breaker).
* `documented-tail-cap`: the breaker spans more than 21 tokens; the tail is clamped to 20 tokens ("we have
  already clamped the maximum tail sequence length"), so the restart completes before the breaker does.
* `promise-breaker-in-token`: the occurrence lies inside one token's piece, but the token is not a
  single-token breaker: get_overlapping_token_sequences reads `vocab.detokenize({id}, true)`, which for a
  vocabulary with a space prefix (SPM) strips the token's leading space ("\u2581the" -> "the") and where
  clean_spaces is set drops spaces before punctuation, so a breaker that begins with a space (or the space
  in " ?") is not seen in the token that carries it in the output.
* `promise-breaker-across-tokens`: the occurrence spans tokens, and no restart sequence covers those tokens:
  the tail init_dry made is the tokenization of the breaker's remainder *on its own*, while in the text
  the remainder is tokenized together with what follows (":\n" one token, "|>\n", "\n\n") or the head's
  detokenized text differs from its piece; or the breaker starts inside the head (a restart head must end
  with a breaker prefix - it does - but a breaker that begins mid-token and ends mid-token of a later token
  is matched only if that later token is exactly the tokenization of the remainder).
* `promise-breaker-phantom`: the library cuts nearer the end than any breaker occurrence ends: a restart
  sequence completed where the text (as printed) holds no breaker.
"""

from __future__ import annotations


import numpy as np

from .seqindex import restart_scan
from .restarts_vocab import MAX_CHAR_LEN, MAX_SEQ_LEN

WINDOW = 60

TEXTS = (
    ("prose", "The committee met on Tuesday. Its chair said: \"We will decide soon.\"\n"
              "Nobody objected; the minutes were approved.\n\nA second meeting followed: short, and quiet.\n"
              "She wrote *very* carefully, and the quick brown fox jumps over the lazy dog.\n"),
    ("markdown", "# Notes\n\n* first item: done\n* second item: **bold** text\n* third item\n\n"
                 "========================================\n"
                 "Section two\n=========================================\n"),
    ("code", "def f(x):\n    if x > 1:\n        return {\"a\": x}\n    return None\n\n"
             "for i in range(10):\n    print(f(i))  # *args\n"),
    ("chatml", "<|im_start|>user\nHello, how are you?<|im_end|>\n<|im_start|>assistant\n"
               "I am fine: thanks!<|im_end|>\n<|im_start|>user\nGood.<|im_end|>\n"),
    ("llama3", "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\nHello! How can I help?<|eot_id|>"),
    ("alpaca", "Below is an instruction.\n\n### Instruction:\nWrite a poem.\n\n### Response:\nRoses are red.\n\n"
               "### Instruction:\nAnother one.\n\n### Response:\nViolets are blue.\n"),
    ("gemma", "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\nIt is 4.<end_of_turn>\n"),
    ("lists", "Count: 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2, done.\n"),
    ("non-ascii", "我们今天开会。会议很短。然后回家。\nThe answer — as always — was no 🙂 ok 🙂🙂\n"
                  "Café, résumé — naïve. ——————————————\n"),
    ("nested", "abc ab abd xabcx ab.\n"),
)

# Breaker sets for the promise sweep: (name, breakers).
PROMISE_SETS = (
    ("defaults", ["\n", ":", "\"", "*"]),
    ("templates", ["<|im_end|>", "<|eot_id|>", "### Instruction:", "<end_of_turn>"]),
    ("spaced", [" the", " and", "\n\n"]),
    ("long", ["=" * 41, "The quick brown fox jumps over the lazy d", "1 2 3 4 5 6 7 8 9 0 1 2"]),
    ("non-ascii", ["—", "。", "🙂"]),
    ("nested", ["ab", "abc"]),
    ("contained", ["### Instruction:", "Instruction"]),  # the source's 'ni' in 'amniotic', on real tokens
)



def spans(pieces, window) -> np.ndarray:
    """The end offsets (exclusive) of each token's piece in the concatenated text."""
    return np.cumsum([len(pieces[t]) for t in window], dtype=np.int64)


def occurrences(text: bytes, b: bytes):
    p = text.find(b)
    while p >= 0:
        yield p
        p = text.find(b, p + 1)


def promised_rep_limit(window, pieces, breakers) -> tuple[int, tuple | None]:
    """(promised rep_limit, the occurrence that sets it as (breaker, start token, end token)) for a window."""
    text = b"".join(pieces[t] for t in window)
    ends = spans(pieces, window)
    n = len(window)
    best = (n, None)
    for b in breakers:
        bb = b.encode() if isinstance(b, str) else b
        if not bb:
            continue
        for p in occurrences(text, bb):
            k1 = int(np.searchsorted(ends, p + len(bb) - 1, side="right"))
            k0 = int(np.searchsorted(ends, p, side="right"))
            rep = n - 1 - k1
            if rep < best[0] or (rep == best[0] and best[1] is not None and k0 > best[1][1]):
                best = (rep, (bb, k0, k1))
    return best


def shipped_scan(window, seqs: dict):
    """Step 1 as shipped over the model's map (oracle.shipped.restart_scan): (rep_limit, (head position,
    tail length) or None)."""
    return restart_scan(list(window), seqs)


def complete_restarts(window, seqs: dict):
    """Every complete restart-sequence occurrence in the window: (head position, end position)."""
    out = []
    w = len(window)
    for k in range(w):
        for t in seqs.get(window[k], ()):
            if k + len(t) < w and tuple(window[k + 1:k + 1 + len(t)]) == t:
                out.append((k, k + len(t)))
    return out


def _cause(window, k0, k1, bb, pieces, texts_of, model, tokenize):
    """Why no restart sequence covers tokens k0..k1 (an occurrence of bb spanning them), from the model."""
    head = window[k0]
    emitted = tuple(window[k0 + 1:k1 + 1])
    tails = model.seqs.get(head)
    if not tails:
        return (f"the head token's text alone ({texts_of[head]!r}, its piece {pieces[head]!r}) does not end "
                f"with a prefix of the breaker")
    text = b"".join(pieces[t] for t in window)
    start = int(sum(len(pieces[t]) for t in window[:k0]))
    p = text.find(bb, start)
    rest = bb[int(sum(len(pieces[t]) for t in window[:k0 + 1])) - p:]
    alone = tuple(tokenize(rest))
    msg = f"the remainder {rest!r} tokenized alone is {list(alone[:MAX_SEQ_LEN])}, emitted {list(emitted)}"
    try:
        rest.decode()
    except UnicodeDecodeError:
        return msg + " (the remainder is not valid UTF-8: the breaker is cut inside a character and the " \
                     "tokenizer turns each stray byte into U+FFFD)"
    if alone and alone[0] not in emitted[:1] and texts_of[alone[0]].strip() == b"" and \
            not rest.startswith(b" "):
        return msg + " (the tokenizer prepends the vocabulary's space prefix)"
    return msg + (" (tokenized alone the remainder is a text of its own - a word start, with the vocabulary's "
                  "word-initial form - while in the text it continues the head's word or merges with what follows)")


def classify(window, pieces, texts_of, breakers, model, observed_rep: int, tokenize=None) -> tuple[str, dict]:
    """The class of one window: observed_rep is the library's rep_limit clipped to len(window)."""
    n = len(window)
    seqs = model.seqs
    prom, occ = promised_rep_limit(window, pieces, breakers)
    prom = min(prom, n)
    ship, used = shipped_scan(window, seqs)
    ship = min(ship, n)
    info = {"promised": prom, "library": observed_rep, "model": ship, "occurrence": occ, "restart": used}
    if ship != observed_rep:
        return "construction-mismatch", info
    if observed_rep == prom:
        return "agree", info
    cut = [b.encode() if isinstance(b, str) else b for b in breakers]
    if any(len(b) > MAX_CHAR_LEN for b in cut):
        cut = [b[:MAX_CHAR_LEN] for b in cut]
        prom_cut, occ_cut = promised_rep_limit(window, pieces, cut)
        if min(prom_cut, n) == observed_rep:
            return "documented-breaker-truncated", info
        prom, occ = min(prom_cut, n), occ_cut  # judge the rest against what init_dry was given
        info["promised_cut_to_40_bytes"] = prom
    if observed_rep < prom:
        return "promise-breaker-phantom", info
    bb, k0, k1 = occ
    if any(end == k1 for _, end in complete_restarts(window, seqs)):
        return "documented-contained-restart", info
    if k1 - k0 > MAX_SEQ_LEN and any(h == k0 and end == k0 + MAX_SEQ_LEN
                                     for h, end in complete_restarts(window, seqs)):
        return "documented-tail-cap", info
    if k0 == k1:
        info["token_text_alone"] = texts_of[window[k0]]
        info["token_piece"] = pieces[window[k0]]
        return "promise-breaker-in-token", info
    info["tokens"] = [pieces[t] for t in window[k0:k1 + 1]]
    if tokenize is not None:
        info["cause"] = _cause(window, k0, k1, bb, pieces, texts_of, model, tokenize)
    return "promise-breaker-across-tokens", info
