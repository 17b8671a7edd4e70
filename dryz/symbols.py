"""The symbol alphabet: token id i is the one-character token SYMBOLS[i] in dryz's vocabulary."""

# Printable ASCII that GPT-2's byte-level encoding maps to itself, so token text == symbol.
SYMBOLS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#"
MAX_ALPHABET = len(SYMBOLS)
_INDEX = {s: i for i, s in enumerate(SYMBOLS)}


def symbol_texts(n: int = MAX_ALPHABET) -> list[str]:
    """The token texts of the first n ids."""
    return list(SYMBOLS[:n])


def symbol_bytes(n: int = MAX_ALPHABET) -> list[bytes]:
    """The token texts of the first n ids as bytes (as a tokenizer's detokenizer gives them)."""
    return [s.encode() for s in SYMBOLS[:n]]


def to_symbols(tokens) -> str:
    return "".join(SYMBOLS[t] for t in tokens)


def from_symbols(text: str) -> list[int]:
    try:
        return [_INDEX[ch] for ch in text]
    except KeyError as e:
        raise ValueError(f"symbol {e.args[0]!r} is not in the dryz alphabet {SYMBOLS!r}") from None
