"""Mechanical mutants of DRY's source: the functions of the DRY section of `src/llama-sampler.cpp` (accept,
apply, reset, clone, init and get_overlapping_token_sequences), one change per mutant, each a unified diff that
`patch -p1` applies to vendor/llama.cpp.

Operators (each applied at every site it matches, in source order):

- `ror`     relational operator replacement, the boundary shift: `<` <-> `<=`, `>` <-> `>=`, `==` <-> `!=`;
- `aor`     arithmetic operator replacement: `+` <-> `-`, `*` <-> `/`, `++` <-> `--`, `+=` <-> `-=`;
- `const`   an integer or float literal k -> k+1 and k-1;
- `bound`   an int computed by an assignment or initialisation (`int n = EXPR;`, `rep_limit = EXPR;`, `x[i] = EXPR;`
            where EXPR is no literal) -> (EXPR) + 1 and (EXPR) - 1;
- `delete`  an expression statement, `break;`, `continue;` or `return;` deleted;
- `negate`  the condition of an `if` or `while` negated;
- `return`  `return;` inserted as the first statement of a void function and before each statement at the top
            level of its body (clone: `return result;` right after `result` is made).

Sites are found on the code of each line with comments and string literals blanked out, so a comment or a log
message is never mutated; a binary operator must have a space on each side (the source's style), so `->`,
`<<`, template brackets and pointer declarators (`auto * ctx`) are not operators.

Generation is deterministic: the same source gives the same list in the same order, and a mutant's id
(`OP-FUNCTION-HASH8`) is a hash of the function, the line's code, its occurrence among the function's lines
with the same code, the column and the replacement: it does not depend on line numbers, so a change elsewhere
in the file leaves every other id as it was.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass

from ..subject.build import dry_section
from ..subject.build import cache_dir, sdist

SOURCE = "src/llama-sampler.cpp"

# The audited functions of the DRY section (the interface table, name, free and the upstream-test wrapper are
# not): a short name for ids and reports, and how the definition starts.
FUNCTIONS = (
    ("overlap", "static void get_overlapping_token_sequences("),
    ("accept", "static void llama_sampler_dry_accept("),
    ("apply", "static void llama_sampler_dry_apply("),
    ("reset", "static void llama_sampler_dry_reset("),
    ("clone", "static struct llama_sampler * llama_sampler_dry_clone("),
    ("init", "struct llama_sampler * llama_sampler_init_dry("),
)
OPERATORS = ("ror", "aor", "const", "bound", "delete", "negate", "return")

ROR = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
AOR = {"+": "-", "-": "+", "*": "/", "/": "*"}
_TYPE_BEFORE_STAR = re.compile(r"(\bauto|\bconst|\bchar|\bvoid|\bllama_\w+|\bstruct\s+\w+)\s*$")
_NUMBER = re.compile(r"(?<![\w.])(\d+\.\d+f?|\d+)(?![\w.])")
_INT_DECL = re.compile(r"^(\s*)(?:const\s+)?(?:int|size_t)\s+(\w+)\s*=\s*(.+);\s*$")
_ASSIGN = re.compile(r"^(\s*)([\w>\-\[\]. ]+?)\s*=\s*(.+);\s*$")
_INT_LHS = re.compile(r"^(rep_limit|longest_match|lt|rt|repeat_exp|max_exponent|dry_penalty_last_n|"
                      r"ctx->dry_repeat_count\[[^\]]+\]|ctx->dry_max_token_repeat\[token\])$")
_COND = re.compile(r"^(\s*)(?:\}\s*else\s+)?(if|while)\s*\(")
_DECL_START = re.compile(r"^\s*(const\s+|static\s+)*(auto|int|bool|size_t|float|llama_token|llama_vocab|std::\w+|"
                         r"struct\s+\w+|llama_\w+)\b[\s*&<]")


@dataclass(frozen=True)
class Mutant:
    id: str
    operator: str
    function: str
    line: int          # 1-based, in the source file
    before: str        # the line(s) as in the source
    after: str         # what replaces them ("" when deleted)
    description: str
    diff: str          # unified diff, `patch -p1` in vendor/llama.cpp

    def to_json(self) -> dict:
        return asdict(self)


def blank_comments_and_strings(lines: list[str]) -> list[str]:
    """Each line's code with comments and the insides of string and char literals replaced by spaces (same
    length, so columns keep their meaning)."""
    out = []
    in_block = False
    for line in lines:
        chars = list(line)
        i = 0
        quote = None
        while i < len(chars):
            c = chars[i]
            nxt = chars[i + 1] if i + 1 < len(chars) else ""
            if in_block:
                if c == "*" and nxt == "/":
                    chars[i] = chars[i + 1] = " "
                    in_block = False
                    i += 2
                    continue
                chars[i] = " "
            elif quote:
                if c == "\\":
                    chars[i] = " "
                    if i + 1 < len(chars):
                        chars[i + 1] = " "
                    i += 2
                    continue
                if c == quote:
                    quote = None
                else:
                    chars[i] = " "
            elif c == "/" and nxt == "/":
                for j in range(i, len(chars)):
                    chars[j] = " "
                break
            elif c == "/" and nxt == "*":
                chars[i] = chars[i + 1] = " "
                in_block = True
                i += 2
                continue
            elif c in "\"'":
                quote = c
            i += 1
        out.append("".join(chars))
    return out


def function_bodies(lines: list[str], code: list[str], first: int, last: int) -> list[tuple[str, int, int, int]]:
    """(name, index of the definition's first line, of the line with the opening brace, of the closing brace
    line) of each audited function between lines first..last (0-based indices)."""
    found = []
    for name, head in FUNCTIONS:
        starts = [i for i in range(first, last + 1) if lines[i].startswith(head)]
        if len(starts) != 1:
            raise ValueError(f"the DRY section has {len(starts)} definitions starting {head!r}")
        i = starts[0]
        depth = 0
        open_line = None
        for j in range(i, last + 1):
            for c in code[j]:
                if c == "{":
                    depth += 1
                    if open_line is None:
                        open_line = j
                elif c == "}":
                    depth -= 1
            if open_line is not None and depth == 0:
                found.append((name, i, open_line, j))
                break
        else:
            raise ValueError(f"no end of {head!r} in the DRY section")
    return found


def _binary_sites(code: str, ops: dict) -> list[tuple[int, str, str]]:
    """(column, operator, replacement) of each binary operator written with a space on each side."""
    sites = []
    for op, repl in ops.items():
        for m in re.finditer(r"(?<= )" + re.escape(op) + r"(?= )", code):
            col = m.start()
            before = code[col - 1] if col else ""
            after = code[col + len(op)] if col + len(op) < len(code) else ""
            if before != " " or after != " ":
                continue
            if op == "*" and _TYPE_BEFORE_STAR.search(code[:col - 1]):
                continue  # a pointer declarator, not a product
            if op in ("-", "+") and code[:col].rstrip().endswith(("(", ",", "=", "return")):
                continue  # unary
            sites.append((col, op, repl))
    return sorted(sites)


def _statement_code(code: str) -> str:
    return code.strip()


def _is_simple_statement(code: str) -> bool:
    s = code.strip()
    if not s.endswith(";") or s.count(";") != 1:
        return False
    if s in ("break;", "continue;", "return;"):
        return True
    if s.startswith(("return", "for", "if", "while", "}", "{", ")")) or _DECL_START.match(code):
        return False
    return True


def _condition_span(code: str, start: int) -> tuple[int, int] | None:
    """(index after '(', index of the matching ')') of the condition that opens at code[start] == '('."""
    depth = 0
    for j in range(start, len(code)):
        if code[j] == "(":
            depth += 1
        elif code[j] == ")":
            depth -= 1
            if depth == 0:
                return start + 1, j
    return None


def _hunk(lines: list[str], index: int, removed: list[str], added: list[str]) -> str:
    """A unified diff replacing `removed` (lines[index:index+len(removed)]) with `added`, 3 lines of context."""
    lo = max(0, index - 3)
    hi = min(len(lines), index + len(removed) + 3)
    before = lines[lo:index]
    after = lines[index + len(removed):hi]
    old_n = len(before) + len(removed) + len(after)
    new_n = len(before) + len(added) + len(after)
    body = [" " + x for x in before] + ["-" + x for x in removed] + ["+" + x for x in added] + [" " + x for x in after]
    return (f"--- a/{SOURCE}\n+++ b/{SOURCE}\n@@ -{lo + 1},{old_n} +{lo + 1},{new_n} @@\n"
            + "\n".join(body) + "\n")


def _ident(op: str, fn: str, code: str, occurrence: int, col: int, repl: str) -> str:
    h = hashlib.sha1(f"{fn}|{code.strip()}|{occurrence}|{col}|{repl}".encode()).hexdigest()[:8]
    return f"{op}-{fn}-{h}"


def generate(source: str) -> list[Mutant]:
    """Every mutant of the audited DRY functions in `source` (the text of src/llama-sampler.cpp)."""
    section = dry_section(source)
    if section is None:
        raise ValueError("no DRY section in the source")
    lines = source.split("\n")
    first = source[:source.index(section)].count("\n")
    last = first + section.count("\n")
    code = blank_comments_and_strings(lines)
    mutants: list[Mutant] = []
    seen: set[str] = set()

    for fn, head_i, open_i, close_i in function_bodies(lines, code, first, last):
        occurrences: dict[str, int] = {}
        returns_void = lines[head_i].startswith("static void")
        depth_at: list[int] = []
        depth = 0
        for i in range(open_i, close_i + 1):
            depth_at.append(depth)
            depth += code[i].count("{") - code[i].count("}")

        def add(op, i, col, repl, removed, added, what):
            key = code[i].strip()
            ident = _ident(op, fn, key, occurrences[key], col, repl)
            if ident in seen:
                return
            seen.add(ident)
            mutants.append(Mutant(ident, op, fn, i + 1, "\n".join(removed), "\n".join(added),
                                  f"{fn} line {i + 1}: {what}", _hunk(lines, i, removed, added)))

        previous = "{"
        for i in range(open_i + 1, close_i):
            src, c = lines[i], code[i]
            if not c.strip():
                continue
            key = c.strip()
            occurrences[key] = occurrences.get(key, -1) + 1
            starts_statement = previous.endswith((";", "{", "}"))
            previous = key
            indent = src[:len(src) - len(src.lstrip())]

            # early return: before each top-level statement (not a declaration) of a void function
            if returns_void and depth_at[i - open_i] == 1 and starts_statement and not key.startswith(
                    ("return", "}")) and not _DECL_START.match(c):
                add("return", i, 0, "return;", [src], [indent + "return;", src],
                    f"`return;` inserted before `{src.strip()}`")
            if fn == "clone" and key.startswith("auto * result ="):
                add("return", i, 1, "return result;", [src], [src, indent + "return result;"],
                    "`return result;` right after the clone is made (no state copied)")

            # relational and arithmetic operator replacement
            for op_name, table in (("ror", ROR), ("aor", AOR)):
                for col, op, repl in _binary_sites(c, table):
                    new = src[:col] + repl + src[col + len(op):]
                    add(op_name, i, col, repl, [src], [new], f"`{op}` -> `{repl}` in `{src.strip()}`")
            for m in re.finditer(r"\+\+|--|\+=|-=", c):
                repl = {"++": "--", "--": "++", "+=": "-=", "-=": "+="}[m.group()]
                new = src[:m.start()] + repl + src[m.end():]
                add("aor", i, m.start(), repl, [src], [new], f"`{m.group()}` -> `{repl}` in `{src.strip()}`")

            # constants +-1
            for m in _NUMBER.finditer(c):
                lit = m.group(1)
                if lit.endswith("f") or "." in lit:
                    value = float(lit.rstrip("f"))
                    digits = len(lit.rstrip("f").split(".")[1])
                    options = [f"{value + d:.{digits}f}" + ("f" if lit.endswith("f") else "") for d in (1, -1)]
                else:
                    options = [str(int(lit) + 1), str(int(lit) - 1)]
                for repl in options:
                    new = src[:m.start()] + repl + src[m.end():]
                    add("const", i, m.start(), repl, [src], [new], f"`{lit}` -> `{repl}` in `{src.strip()}`")

            # bounds +-1: an int computed by an assignment or initialisation
            md = _INT_DECL.match(c)
            ma = _ASSIGN.match(c) if not md else None
            target = None
            if md:
                target = (md.group(3), c.index(md.group(3), c.index("=")))
            elif ma and _INT_LHS.match(ma.group(2).strip()):
                target = (ma.group(3), c.index(ma.group(3), c.index("=")))
            if target and not _NUMBER.fullmatch(target[0].strip().lstrip("-")):
                expr, col = target
                end = col + len(expr)
                for delta in ("+ 1", "- 1"):
                    new = src[:col] + f"({src[col:end]}) {delta}" + src[end:]
                    add("bound", i, col, delta, [src], [new], f"`{expr}` -> `({expr}) {delta}`")

            # statement deletion
            if _is_simple_statement(c):
                add("delete", i, 0, "", [src], [], f"`{src.strip()}` deleted")

            # condition negation
            mc = _COND.match(c)
            if mc:
                span = _condition_span(c, mc.end() - 1)
                if span:
                    a, b = span
                    new = src[:a] + "!(" + src[a:b] + ")" + src[b:]
                    add("negate", i, a, "!", [src], [new], f"`{src[a:b].strip()}` negated")
    return mutants


def sdist_source(version: str, log=lambda m: None) -> str:
    """src/llama-sampler.cpp of the llama-cpp-python sdist of `version` (fetched once, as dryz subject build
    fetches it)."""
    import tarfile
    from pathlib import Path

    work = cache_dir() / "work"
    work.mkdir(parents=True, exist_ok=True)
    tgz = sdist(version, log, Path(work / f"mutate-{version}.log"))
    with tarfile.open(tgz, "r:gz") as tf:
        member = f"llama_cpp_python-{version}/vendor/llama.cpp/{SOURCE}"
        return tf.extractfile(member).read().decode()
