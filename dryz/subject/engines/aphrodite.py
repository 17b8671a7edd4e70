"""dryz's adapter for Aphrodite's DRY (pip install 'dryz[aphrodite]': torch and CUDA's runtime library; the
engine's wheel is fetched once): `--subject engine:aphrodite` (the compiled scan, what 0.24.1 runs on Linux) and
`--subject engine:aphrodite-python` (its Python fallback).

Aphrodite (aphrodite-engine 0.24.1, AGPL-3.0) is a CUDA wheel. Its DRY is applied by SamplingOps.apply_dry
(aphrodite/v1/sample/ops/__init__.py:93-196) to the logits with a SamplingMetadata (aphrodite/v1/sample/metadata.py),
which takes one of two paths to find the penalized tokens and their match lengths:
  compiled  when the metadata carries token_history_ids_cpu and the other *_cpu fields (ops/__init__.py:109-141):
            the op torch.ops._C.dry_scan_penalties of the wheel's aphrodite/_C_stable_libtorch.abi3.so, registered
            for the CPU dispatch key (csrc/cpu/dry.cpp). The V1 model runner's input batch fills those fields for
            every batch with a DRY request (v1/worker/gpu_input_batch.py:1289-1291, 1355-1365; dry_multiplier > 0 at
            :606), so this is the path a CUDA user of 0.24.1 runs when DRY is applied: `engine:aphrodite`.
  python    otherwise (ops/__init__.py:143-195): DryRequestState and _compute_dry_penalties in
            aphrodite/v1/sample/ops/dry.py. 0.24.1's Metal runner builds no token history
            (metal/v1/sampling_batch.py:431-442) and takes it: `engine:aphrodite-python`.
Either way the penalties are then base ** (L - allowed_length) * multiplier, subtracted in the logits' dtype by the
same Python (ops/__init__.py:136-140, 190-193), here on CPU tensors (on the user's GPU in a real run).

0.24.1's default model runner on CUDA (V2: config/aphrodite.py:634-663, unless APHRODITE_USE_V2_MODEL_RUNNER=0,
Triton is missing or a feature it lacks is asked for) has a sampler of its own (v1/worker/gpu/sample/sampler.py)
that reads no dry_* parameter: there a request's DRY parameters change nothing. dryz audits the DRY code 0.24.1
ships, not that wiring (it needs a GPU to run).

The wheel's three Python files are read from the wheel (fetched with `pip download --no-deps` into dryz's cache,
never installed) and executed at run time with stand-ins for the modules they import and do not use here. The
compiled path extracts the wheel's library unchanged into the cache and loads it with torch.ops.load_library (as
platforms/cuda.py:41 imports it) into torch 2.13.0, the release the wheel requires (its METADATA: torch==2.13.0; the
library's stable-ABI calls target 2.13). Its other dependencies on a machine without a GPU: libcudart.so.13 is the
real one (PyPI's nvidia-cuda-runtime); libcuda.so.1 (the NVIDIA driver, which no package installs) is the machine's
if it has one, else a stand-in that defines the three driver entry points the library links and answers each as
NVIDIA's own stub library does (CUDA_ERROR_STUB_LIBRARY); with a CPU build of torch, libtorch_cuda.so and the cuBLAS
entry points the library links are a stand-in that aborts with its name if ever called. The stand-ins are built
from the C source below with the machine's C compiler into the cache; the CPU kernel reaches none of them. Nothing
of Aphrodite is copied into dryz. The handshake's version names the path, the library and the stand-ins used.

The request's parameters go into the metadata by their documented meaning (SamplingParams, sampling_params.py:387):
dry_multiplier, dry_base, dry_allowed_length, dry_range = penalty_last_n ("Token window used by DRY."), the
breaker strings as the API resolves them (dry_sequence_breakers: "String-form DRY breakers resolved to token ids once
a tokenizer exists."; SamplingParams.update_from_tokenizer, sampling_params.py:830-833: each string's id is the last
of tokenizer.encode("a" + string), on dryz's symbol vocabulary the string's last character), and the engine's own
defaults for what
llama.cpp has no parameter for: dry_max_ngram 12, dry_max_occurrences 8, dry_early_exit_match_len 8. The history is
the prompt. Parameters the API refuses (SamplingParams._verify_args: its error messages are what a user sees) are
answered as that refusal.

Declared, each cited from sampling_params.py of 0.24.1 (SamplingParams' attribute docs and its validation
messages): breakers are token ids (single-token-breakers), the n-gram cap, the occurrence cap and the early exit,
and the four refusals. Nothing else: what only the code does is judged as a finding.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import types
import zipfile
from pathlib import Path

from .serve import NotExpressible, Refusal, engine, initial_logits, stand_ins, symbol_pieces

VERSION = "0.24.1"


def resolved_breakers(pieces: list[str], strings) -> list[int]:
    """The breaker strings as Aphrodite's API resolves them (SamplingParams.update_from_tokenizer,
    sampling_params.py:830-833: `tokenizer.encode(text=f"a{breaker}", add_special_tokens=False)[-1]`, each string
    one id, in order): on dryz's symbol vocabulary, where every character is its own token, the id of the string's
    last character."""
    index = {p: i for i, p in enumerate(pieces)}
    return [index[("a" + s)[-1]] for s in strings]
MAX_NGRAM, MAX_OCCURRENCES, EARLY_EXIT = 12, 8, 8  # SamplingParams' defaults (sampling_params.py:399-403)
CITED = "aphrodite-engine 0.24.1, aphrodite/sampling_params.py:{line}, SamplingParams: {text}"
DECLARED = [
    {"name": "single-token-breakers",
     "cited": CITED.format(line=396, text='dry_sequence_breaker_ids: "Token ids that split DRY repetition windows."')},
    {"name": f"match-cap:{MAX_NGRAM}",
     "cited": CITED.format(line=400, text=f'dry_max_ngram = {MAX_NGRAM}: "Maximum n-gram length checked by DRY."')},
    {"name": f"occurrence-cap:{MAX_OCCURRENCES}",
     "cited": CITED.format(line=402, text=f'dry_max_occurrences = {MAX_OCCURRENCES}: "Maximum occurrences DRY '
                                           'scans."')},
    {"name": f"early-exit:{EARLY_EXIT}",
     "cited": CITED.format(line=404, text=f'dry_early_exit_match_len = {EARLY_EXIT}: "DRY early-exit match '
                                           'threshold."')},
    {"name": "base-below-one:refused",
     "cited": CITED.format(line=782, text='"dry_base must be greater than 1."')},
    {"name": "multiplier-negative:refused",
     "cited": CITED.format(line=780, text='"dry_multiplier must be non-negative."')},
    {"name": "allowed-negative:refused",
     "cited": CITED.format(line=784, text='"dry_allowed_length must be non-negative."')},
    {"name": "window-negative:refused",
     "cited": CITED.format(line=786, text='"dry_range must be non-negative."')},
]


def engine_dir() -> Path:
    from ..cache import cache_dir  # on use: the adapter's start-up (run as its own process)
    return cache_dir() / "engines" / f"aphrodite-{VERSION}"


DRY = "aphrodite/v1/sample/ops/dry.py:{line} (0.24.1): {text}"
OPS = "aphrodite/v1/sample/ops/__init__.py:{line} (0.24.1): {text}"
CPP = ("csrc/cpu/dry.cpp:{line} (upstream source at b42eeec22; the 0.24.1 wheel ships it compiled, in "
       "_C_stable_libtorch.abi3.so): {text}")
# The engine's code behind each deviation model dryz may fit (dryz.causes), per path: what the conformance page
# cites. The scan's rules are dry.py's (the Python fallback) or dry.cpp's (the compiled op); the arithmetic is
# apply_dry's in both (float32 tensors).
SOURCES = {
    "python": [
        {"name": "breaker-form:last-token", "source": "aphrodite/sampling_params.py:832 (0.24.1): token_id = "
                                                      "tokenizer.encode(text=f\"a{breaker}\")[-1]"},
        {"name": "repeat-min:N", "source": DRY.format(line=127, text="if match_len <= 0: continue (a repeat of the "
                                                      "last token alone is never penalized)")},
        {"name": "exit:at-allowed", "source": DRY.format(line=112, text="if curr_max_ngram <= allowed_length: "
                                                         "return {}")},
        {"name": "threshold:none", "source": OPS.format(line=192, text="scales = dry_base ** (match_lens - "
                                                         "allowed_lengths): no match_len >= allowed_length test")},
        {"name": "match-cap:N", "source": DRY.format(line=118, text="max_unwind = min(idx - start_idx, "
                                                      "curr_max_ngram): the repeat at most dry_max_ngram + 1")},
        {"name": "window-zero:unlimited", "source": DRY.format(line=97, text="start_idx = max(0, history_len - "
                                                                "range_limit) if range_limit > 0 else 0")},
        {"name": "breakers-not-exempt", "source": DRY.format(line=132, text="penalties[next_tok] = ...: the token "
                                                              "after an occurrence, breaker or not")},
        {"name": "arithmetic:float32", "source": OPS.format(line=193, text="logits -= dry_multiplier * dry_base ** "
                                                             "(match_lens - allowed): float32 tensors")},
        {"name": "no-clamp", "source": OPS.format(line=192, text="dry_base ** (match_lens - allowed): no exponent "
                                                   "clamp")},
        {"name": "occurrence-cap:N", "source": DRY.format(line=104, text="endpoint_indexes[-max_occurrences:]")},
        {"name": "early-exit:N", "source": DRY.format(line=133, text="if new_len >= early_exit_match_len: break")},
    ],
    "compiled": [
        {"name": "breaker-form:last-token", "source": "aphrodite/sampling_params.py:832 (0.24.1): token_id = "
                                                      "tokenizer.encode(text=f\"a{breaker}\")[-1]"},
        {"name": "repeat-min:N", "source": CPP.format(line=160, text="if (match_len <= 0) continue; (a repeat of the "
                                                      "last token alone is never penalized)")},
        {"name": "exit:tail-at-allowed", "source": CPP.format(line=118, text="if (curr_max_ngram <= min_ngram) "
                                                              "continue; curr_max_ngram stops one token before a "
                                                              "breaker (:104-115)")},
        {"name": "exit:at-allowed", "source": CPP.format(line=118, text="if (curr_max_ngram <= min_ngram) continue;")},
        {"name": "threshold:none", "source": OPS.format(line=137, text="scales = dry_base ** (match_lens - "
                                                         "allowed_lengths): no match_len >= allowed_length test")},
        {"name": "match-cap:N", "source": CPP.format(line=145, text="max_unwind = min(idx - start_idx, "
                                                      "curr_max_ngram): the repeat at most dry_max_ngram + 1")},
        {"name": "window-zero:unlimited", "source": CPP.format(line=101, text="start_idx = range_limit > 0 ? "
                                                                "max(0, history_len - range_limit) : 0")},
        {"name": "breakers-not-exempt", "source": CPP.format(line=164, text="next_token = history[idx + 1]: the "
                                                              "token after an occurrence, breaker or not")},
        {"name": "arithmetic:float32", "source": OPS.format(line=138, text="logits -= dry_multiplier * scales: "
                                                             "float32 tensors")},
        {"name": "no-clamp", "source": OPS.format(line=137, text="dry_base ** (match_lens - allowed): no exponent "
                                                   "clamp")},
        {"name": "occurrence-cap:N", "source": CPP.format(line=133, text="endpoint_indexes.erase(begin, end - "
                                                          "max_occurrences)")},
        {"name": "early-exit:N", "source": CPP.format(line=176, text="if (new_len >= early_exit_val) break;")},
    ],
}


def wheel() -> Path:
    """The aphrodite-engine wheel in dryz's cache, fetched once with pip download (not installed)."""
    d = engine_dir()
    found = sorted(d.glob("aphrodite_engine-*.whl"))
    if not found:
        d.mkdir(parents=True, exist_ok=True)
        p = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                            f"aphrodite-engine=={VERSION}", "-d", str(d)], capture_output=True, text=True)
        found = sorted(d.glob("aphrodite_engine-*.whl"))
        if p.returncode or not found:
            raise SystemExit(f"cannot fetch aphrodite-engine=={VERSION}: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return found[-1]


def _run_member(zf, member: str, name: str, path: Path, patch=None):
    mod = types.ModuleType(name)
    mod.__file__ = f"{path}!/{member}"
    sys.modules[name] = mod  # dataclasses look the module up while its body runs
    source = zf.read(member).decode()
    if patch is not None:
        source = patch.source(member, source)
    exec(compile(source, mod.__file__, "exec"), mod.__dict__)
    return mod


def load(path: Path, patch=None):
    """(SamplingOps, SamplingMetadata) executed from the wheel, with stand-ins for what they import and do not use;
    patch: a patching.Patched applied to their sources as they are read (engine:aphrodite-python+patch=FILE)."""
    pkgs = ["aphrodite", "aphrodite.v1", "aphrodite.v1.sample", "aphrodite.v1.sample.ops"]
    stubs = {n: types.ModuleType(n) for n in pkgs}
    for n in pkgs:
        stubs[n].__path__ = []
    for n, cls in (("aphrodite.v1.sample.logits_processor", "LogitsProcessors"),
                   ("aphrodite.v1.sample.thinking_budget_state", "ThinkingBudgetStateHolder")):
        stubs[n] = types.ModuleType(n)
        setattr(stubs[n], cls, type(cls, (), {}))

    def unused(*a, **k):
        raise RuntimeError("not loaded by dryz's adapter (only DRY is)")
    for op, fn in (("bad_words", "apply_bad_words"), ("penalties", "apply_all_penalties"), ("epsilon_cutoff", None),
                   ("eta_cutoff", None), ("min_p", None), ("mirostat", None), ("no_repeat_ngram", None),
                   ("quadratic", None), ("skew", None), ("tfs", None), ("top_a", None), ("top_nsigma", None),
                   ("typical_p", None), ("xtc", None)):
        m = types.ModuleType(f"aphrodite.v1.sample.ops.{op}")
        setattr(m, fn or op, unused)
        stubs[m.__name__] = m
    own = ["aphrodite.v1.sample.metadata", "aphrodite.v1.sample.ops.dry", "_dryz_aphrodite_ops"]
    with stand_ins(stubs, own), zipfile.ZipFile(path) as zf:
        meta = _run_member(zf, "aphrodite/v1/sample/metadata.py", own[0], path, patch)
        _run_member(zf, "aphrodite/v1/sample/ops/dry.py", own[1], path, patch)
        ops = _run_member(zf, "aphrodite/v1/sample/ops/__init__.py", own[2], path, patch)
    if patch is not None:
        patch.done()
    return ops.SamplingOps, meta.SamplingMetadata


LIBRARY = "aphrodite/_C_stable_libtorch.abi3.so"  # platforms/cuda.py:41: `import aphrodite._C_stable_libtorch`
OP = "_C::dry_scan_penalties"
# Stand-ins for what the library links and a machine without a GPU lacks (never reached by the CPU kernel).
DRIVER_STAND_IN = """/* dryz's stand-in for the NVIDIA driver library (none on this machine): the three entry points
   aphrodite/_C_stable_libtorch.abi3.so links, each answering CUDA_ERROR_STUB_LIBRARY as NVIDIA's stub does */
int cuGetProcAddress_v2(void) { return 34; }
int cuPointerGetAttribute(void) { return 34; }
int cuTensorMapEncodeTiled(void) { return 34; }
"""
TORCH_CUDA_STAND_IN = """/* dryz's stand-in for libtorch_cuda.so and the cuBLAS entry points (a CPU build of torch has
   neither) that aphrodite/_C_stable_libtorch.abi3.so links: its CUDA kernels call them, its CPU kernels do not */
#include <stdio.h>
#include <stdlib.h>
#define STAND_IN(name) void name(void) { fputs("dryz stand-in reached: " #name "\\n", stderr); abort(); }
STAND_IN(aoti_torch_get_current_cuda_stream) STAND_IN(torch_c10_cuda_check_msg)
STAND_IN(torch_c10_cuda_free_error_msg) STAND_IN(torch_get_current_cuda_blas_handle)
STAND_IN(cublasGemmEx) STAND_IN(cublasGetMathMode) STAND_IN(cublasHgemm) STAND_IN(cublasSetPointerMode_v2)
STAND_IN(cublasSetStream_v2) STAND_IN(cublasSetWorkspace_v2)
"""


def _log(msg: str) -> None:
    print(f"dryz engine:aphrodite: {msg}", file=sys.stderr)


def _library(path: Path, d: Path) -> tuple[Path, str]:
    """The wheel's compiled library, extracted unchanged (zipfile checks its CRC) into dryz's cache, and its
    sha256 (computed once, beside it)."""
    from ..cache import sha256_file  # on use: the adapter's start-up
    out = d / path.stem / Path(LIBRARY).name
    digest = out.with_name(out.name + ".sha256")
    if not (out.exists() and digest.exists()):
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".part")
        with zipfile.ZipFile(path) as zf, zf.open(LIBRARY) as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(tmp, out)
        digest.write_text(sha256_file(out) + "\n")
    return out, digest.read_text().strip()


def _stand_in(d: Path, soname: str, source: str) -> Path:
    """A stand-in library built from `source` with the machine's C compiler, once, into dryz's cache."""
    out = d / "stand-ins" / hashlib.sha256(source.encode()).hexdigest()[:12] / soname
    if out.exists():
        return out
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise SystemExit(f"engine:aphrodite needs a C compiler (cc) to build its stand-in {soname}")
    out.parent.mkdir(parents=True, exist_ok=True)
    src, tmp = out.parent / f"{soname}.c", out.parent / f"{soname}.part"
    src.write_text(source)
    p = subprocess.run([cc, "-shared", "-fPIC", "-O2", f"-Wl,-soname,{soname}", "-o", str(tmp), str(src)],
                       capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"engine:aphrodite: cannot build its stand-in {soname}: "
                         f"{(p.stderr.strip().splitlines() or ['?'])[-1]}")
    os.replace(tmp, out)
    return out


def _cudart() -> Path:
    """libcudart.so.13 from PyPI's nvidia-cuda-runtime (torch's CUDA builds depend on it too)."""
    import importlib.util
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        lib = Path(base) / "cu13" / "lib" / "libcudart.so.13"
        if lib.exists():
            return lib
    raise SystemExit("engine:aphrodite needs libcudart.so.13 (nvidia-cuda-runtime): "
                     "pip install 'dryz[aphrodite]'")


def _driver() -> bool:
    """Whether this machine has a CUDA driver library (libcuda.so.1, loaded as platforms/cuda.py:24-34 preloads
    it). A stand-in this process loaded earlier answers to the same name: it is not a driver."""
    try:
        ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return False
    with open("/proc/self/maps") as maps:
        return not any("/stand-ins/" in line and line.rstrip().endswith("/libcuda.so.1") for line in maps)


def runtime(path: Path, cpu_torch: bool) -> tuple[Path, str, list[Path], list[str]]:
    """What the compiled scan needs to load on this machine: (the wheel's library, its sha256, the libraries to
    load first, globally: CUDA's runtime and the stand-ins this machine needs, and their names). cpu_torch: the
    torch that loads it is a CPU build."""
    from ..cache import locked  # on use: the adapter's start-up
    d = engine_dir()
    with locked(d / ".lock", _log):
        lib, sha256 = _library(path, d)
        driver = torch_cuda = None
        if not _driver():
            driver = _stand_in(d, "libcuda.so.1", DRIVER_STAND_IN)
        if cpu_torch:
            torch_cuda = _stand_in(d, "libtorch_cuda.so", TORCH_CUDA_STAND_IN)
    used = [n for n, x in (("libcuda.so.1", driver), ("libtorch_cuda.so + cuBLAS", torch_cuda)) if x]
    return lib, sha256, [_cudart()] + [x for x in (driver, torch_cuda) if x is not None], used


def load_scan(path: Path, torch) -> str:
    """Load the wheel's library, which registers torch.ops._C.dry_scan_penalties (what apply_dry calls); returns
    what was loaded to run it, as a line."""
    lib, sha256, first, stand_ins_used = runtime(path, torch.version.cuda is None)
    for x in first:
        ctypes.CDLL(str(x), mode=ctypes.RTLD_GLOBAL)
    torch.ops.load_library(str(lib))
    if not torch._C._dispatch_has_kernel_for_dispatch_key(OP, "CPU"):
        raise SystemExit(f"engine:aphrodite: {LIBRARY} registers no CPU kernel for {OP}")
    return (f"compiled scan {OP} from {LIBRARY} (sha256 {sha256[:16]}) on the CPU; torch {torch.__version__}; "
            f"stand-ins: {', '.join(stand_ins_used) or 'none'}")


PATHS = {
    "compiled": "aphrodite",         # the V1 runner's input batch fills token_history_ids_cpu: the op runs
    "python": "aphrodite-python",    # no token history in the metadata (the Metal runner): DryRequestState
}


class Adapter:
    def __init__(self, path: str = "compiled", patch=None):
        import torch
        torch.set_num_threads(1)
        self.torch = torch
        self.compiled = path == "compiled"
        self.path = wheel()
        ops, self.Metadata = load(self.path, patch)
        self.ops = ops()
        self.pieces = symbol_pieces()
        self.scan = load_scan(self.path, torch) if self.compiled else \
            "Python fallback DryRequestState/_compute_dry_penalties (aphrodite/v1/sample/ops/dry.py)"

    def run(self, req):
        torch = self.torch
        if req["vocab"]["name"] != "symbols":
            raise NotExpressible("the adapter runs dryz's symbol vocabulary")
        p = req["params"]
        m, base, allowed, window = float(p["multiplier"]), float(p["base"]), int(p["allowed_length"]), \
            int(p["penalty_last_n"])
        # SamplingParams._verify_args (sampling_params.py:779-786): what the API answers a user
        if m < 0.0:
            raise Refusal("dry_multiplier must be non-negative.")
        if base <= 1.0:
            raise Refusal("dry_base must be greater than 1.")
        if allowed < 0:
            raise Refusal("dry_allowed_length must be non-negative.")
        if window < 0:
            raise Refusal("dry_range must be non-negative.")
        V = len(self.pieces)
        logits = torch.tensor([initial_logits(req, V)], dtype=torch.float32)
        if m > 0.0:  # a request enables DRY with a positive multiplier (gpu_input_batch.py:606)
            breakers = resolved_breakers(self.pieces, p["breakers"])
            md = self.metadata(req["history"], m, base, allowed, breakers, window, V)
            logits = engine(self.ops.apply_dry, logits, md)
        row = logits[0].tolist()
        return [row[t] for t, _ in req["candidates"]], bool(req["sorted"])

    def metadata(self, history, m, base, allowed, breakers, window, V):
        torch = self.torch
        f32 = lambda x: torch.tensor([x], dtype=torch.float32)  # noqa: E731
        i32 = lambda x: torch.tensor([x], dtype=torch.int32)  # noqa: E731
        # gpu_input_batch.py:1495-1514: the breakers padded with vocab_size, (1, 0) when there are none
        br = lambda: (torch.tensor([breakers], dtype=torch.long) if breakers  # noqa: E731
                      else torch.empty((1, 0), dtype=torch.long))
        md = self.Metadata(
            temperature=None, all_greedy=True, all_random=False, top_p=None, top_k=None, generators={},
            max_num_logprobs=None, no_penalties=True,
            prompt_token_ids=torch.tensor([list(history) or [V]], dtype=torch.long),
            frequency_penalties=torch.zeros(1), presence_penalties=torch.zeros(1), repetition_penalties=torch.ones(1),
            output_token_ids=[[]], allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=None,
            dry_multiplier=f32(m), dry_base=f32(base), dry_allowed_length=i32(allowed), dry_sequence_breaker_ids=br(),
            dry_ranges=i32(window), dry_max_ngram=i32(MAX_NGRAM), dry_max_occurrences=i32(MAX_OCCURRENCES),
            dry_early_exit_match_len=i32(EARLY_EXIT))
        md.persistent_data = {}
        if not self.compiled:
            md.token_history_ids_cpu = None  # the Python path (DryRequestState), as the Metal runner's metadata
            return md
        # as the V1 input batch builds them (gpu_input_batch.py:1289-1291, 1355-1365): the history a view of the
        # int32 token buffer (:138-143, zeros past the request's tokens; its width is max_model_len), its length
        # int32 (:1442-1454), the parameters from their own CPU tensors (:322-356)
        buffer = torch.zeros((1, len(history) + 1), dtype=torch.int32)
        buffer[0, :len(history)] = torch.tensor(list(history), dtype=torch.int32)
        md.token_history_ids_cpu = buffer[:1, :len(history)]
        md.token_history_lens_cpu = i32(len(history))
        md.dry_multiplier_cpu, md.dry_allowed_length_cpu, md.dry_sequence_breaker_ids_cpu = f32(m), i32(allowed), br()
        md.dry_ranges_cpu, md.dry_max_ngram_cpu = i32(window), i32(MAX_NGRAM)
        md.dry_max_occurrences_cpu, md.dry_early_exit_match_len_cpu = i32(MAX_OCCURRENCES), i32(EARLY_EXIT)
        return md


def make(path: str = "compiled", patch: str | None = None):
    """(handshake, run): the adapter on one path, in whatever process asks (the adapter's own, or a fuzz job's);
    patch: a patch file applied to the Python files as they are read (engine:aphrodite-python+patch=FILE;
    patching.PatchError when it does not apply; EngineSubject refuses one for the compiled scan)."""
    from . import ENGINES  # on use: the adapter's start-up
    from .patching import Patched  # on use: the adapter's start-up
    p = Patched(patch, ENGINES[PATHS[path]].patchable, PATHS[path])
    adapter = Adapter(path, p if patch else None)
    hello = {"engine": PATHS[path], "version": f"{VERSION}{p.label()} ({adapter.path.name}; {adapter.scan})",
             "deviations": DECLARED, "sources": SOURCES[path], "vocabularies": ["symbols"], "initial_logits": True,
             "candidate_arrays": True, "sorted_flag": False, "batch": 64}
    return hello, adapter.run


def main(path: str = "compiled") -> int:
    from .patching import adapter_main  # on use: the adapter's start-up
    return adapter_main(make, PATHS[path], path)


if __name__ == "__main__":
    sys.exit(main())
