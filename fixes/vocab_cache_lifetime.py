"""served-cost-vocab-cache.diff's cache must not outlive its vocabulary: timed llama_sampler_init_dry calls
(llama-bpe, breaker "\\n") on one vocabulary, then again after the model is freed and the same file loaded
again (usually at the same address). On the patched build the first call on a vocabulary pays the
detokenization and the next ones do not; after the reload the first call must pay it again (the entry was
dropped by ~llama_vocab), whatever the address. On the plain build every call pays it.

    python fixes/vocab_cache_lifetime.py LIBLLAMA_FOLDER
"""

from __future__ import annotations

import ctypes
import sys
import time
from pathlib import Path

from dryz.subject.binding import ARGS7, Binding
from dryz.subject.vendored_vocabs import resolve_vocab


def main(argv) -> int:
    folder = Path(argv[0])
    b = Binding(next(folder.glob("libllama.so*")))
    init = b.llama_sampler_init_dry
    init.argtypes, init.restype = ARGS7, ctypes.c_void_p
    breakers = (ctypes.c_char_p * 1)(b"\n")
    gguf = resolve_vocab("llama-bpe").path

    def timed(vocab) -> float:
        t0 = time.perf_counter()
        s = init(vocab, 1.0, 2.0, 2, 64, ctypes.cast(breakers, ctypes.c_void_p), 1)
        dt = time.perf_counter() - t0
        b.llama_sampler_free(s)
        return dt * 1e3

    model, vocab = b.load_vocab(gguf)
    first = [timed(vocab) for _ in range(3)]
    b.llama_model_free(model)
    model2, vocab2 = b.load_vocab(gguf)
    again = [timed(vocab2) for _ in range(3)]
    b.llama_model_free(model2)
    print(f"vocabulary at {vocab:#x}: init_dry {', '.join(f'{x:.1f}' for x in first)} ms")
    print(f"freed, reloaded at {vocab2:#x} ({'the same' if vocab2 == vocab else 'another'} address): "
          f"init_dry {', '.join(f'{x:.1f}' for x in again)} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
