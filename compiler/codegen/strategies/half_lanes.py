"""float16 conversions of a lane loop done 16 values at a time (`vcvtph2ps` / `vcvtps2ph`) instead of per value.

g++ 12 vectorizes no float16 <-> float conversion (neither `_Float16` casts nor F16C's scalar ones, half.py), so a
float16 value in a vectorized loop costs ~12 integer operations each way. A lane loop (codegen/cpp.py's fixed
blocks of 32 or 64 lanes over contiguous elements)

    #pragma omp simd
    for (int64_t x1_lane = 0; x1_lane < 32; x1_lane++)
    {
        int64_t x1 = x1_base + x1_lane;
        auto tmp0 = lens_fp16_to_float(in_ptr0[x1 + 1024*x0]);
        ...
        out_ptr0[x1 + 1024*x0] = lens_float_to_fp16(tmp8);
    }

instead converts the block's float16 inputs into float lanes before the loop and its float16 outputs after it:

    alignas(64) float tmp0_lanes[32];
    lens_fp16_load_lanes<32>(in_ptr0 + (x1_base + 1024*x0), tmp0_lanes);
    #pragma omp simd
    for (...) { ...; auto tmp0 = tmp0_lanes[x1_lane]; ...; out_ptr0_lanes[x1_lane] = tmp8; }
    lens_fp16_store_lanes<32>(out_ptr0 + (x1_base + 1024*x0), out_ptr0_lanes);

(the same bits: the instructions round to nearest even, as c10 does). Only statements the loop runs for every
lane (no `if`/`else` in its body), at an index that steps by one element per lane, a stored buffer read nowhere
else in the loop once its loads are converted (a kernel writing in place reads the block before the loop);
everything else keeps the per-value conversions. Measured on the (8192, 1024) float16
`((a0+a1)+a2)*a3+a4` kernel, 2 threads of the AMX Xeon: 3.2 -> 2.0 ms (docs/performance.md).
"""
from __future__ import annotations

import re

import sympy

from compiler import config

PRELUDE = r"""#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
typedef float lens_v16sf_h __attribute__((vector_size(64)));
typedef short lens_v16hi_h __attribute__((vector_size(32)));
template <int N> static inline __attribute__((always_inline)) void lens_fp16_load_lanes(
    const lens_fp16* __restrict__ p, float* __restrict__ out) {
  for (int i = 0; i < N; i += 16) {
    lens_v16hi_h h;
    __builtin_memcpy(&h, p + i, 32);
    const lens_v16sf_h f = __builtin_ia32_vcvtph2ps512_mask(h, lens_v16sf_h{}, (unsigned short)-1, 4);
    __builtin_memcpy(out + i, &f, 64);
  }
}
typedef short lens_v32hi_h __attribute__((vector_size(64)));
static inline __attribute__((always_inline)) lens_v16hi_h lens_fp16_of_v16(const float* __restrict__ in) {
  lens_v16sf_h f;
  __builtin_memcpy(&f, in, 64);
  return __builtin_ia32_vcvtps2ph512_mask(f, 0, lens_v16hi_h{}, (unsigned short)-1);
}
template <int N> static inline __attribute__((always_inline)) void lens_fp16_store_lanes(
    lens_fp16* __restrict__ p, const float* __restrict__ in) {
  int i = 0;
  // pairs of halves stored as one 64-byte vector: a whole line that a streaming store (codegen/strategies/streaming.py)
  // then loads gets it forwarded from one store; from two 32-byte stores forwarding fails (a float16 layer
  // norm's output pass stalled there: 45% of its samples)
  for (; i + 32 <= N; i += 32) {
    const lens_v32hi_h h = __builtin_shufflevector(lens_fp16_of_v16(in + i), lens_fp16_of_v16(in + i + 16),
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
        16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
    __builtin_memcpy(p + i, &h, 64);
  }
  for (; i < N; i += 16) {
    const lens_v16hi_h h = lens_fp16_of_v16(in + i);
    __builtin_memcpy(p + i, &h, 32);
  }
}
#else
template <int N> inline void lens_fp16_load_lanes(const lens_fp16* p, float* out) {
  for (int i = 0; i < N; i++) out[i] = lens_fp16_to_float(p[i]);
}
template <int N> inline void lens_fp16_store_lanes(lens_fp16* p, const float* in) {
  for (int i = 0; i < N; i++) p[i] = lens_float_to_fp16(in[i]);
}
#endif
"""

_LOOP = re.compile(r"^(\s*)for \(int64_t (\w+)_lane = 0; \2_lane < (\d+); \2_lane\+\+\)$")
_PLAIN_LOOP = re.compile(r"^(\s*)for \(int64_t (\w+) = 0; \2 < ([^;]+); \2\+\+\)$")
_PRAGMA = re.compile(r"^(\s*)#pragma omp (parallel for )?simd(.*)$")
BLOCK = 64  # lanes of a block a plain loop is cut into (four vectors of 16 floats)
_LOAD = re.compile(r"^(\s*)auto (tmp\d+) = lens_fp16_to_float\((\w+)\[([^\[\]]+)\]\);$")
_STORE = re.compile(r"^(\s*)(\w+)\[([^\[\]]+)\] = lens_float_to_fp16\(([^;]+)\);$")
_STORED = re.compile(r"^\s*(\w+)\[[^\[\]]+\] = ")
_DEFINED = re.compile(r"^\s*(?:const )?(?:int64_t|auto|float) (\w+) =")

Line = tuple[str, list[str]]


def apply(lines: list[Line]) -> list[Line]:
    """A kernel's lines with the float16 conversions of its lane loops done by blocks (unchanged without any)."""
    if not config.cpp.half_lanes or not any("lens_fp16_to_float(" in t or "lens_float_to_fp16(" in t for t, _ in lines):
        return lines
    out: list[Line] = []
    i = 0
    while i < len(lines):
        lane, plain = _LOOP.match(lines[i][0]), _PLAIN_LOOP.match(lines[i][0])
        pragma = _PRAGMA.match(out[-1][0]) if out else None
        end = _loop_end(lines, i, (lane or plain).group(1)) if pragma and (lane or plain) else None
        if end is None:
            out.append(lines[i])
            i += 1
            continue
        if lane:
            before, loop, after = _rewrite(lines[i:end + 1], lane.group(1), lane.group(2), int(lane.group(3)))
            if before:  # (a block of its own: the lane arrays' names are then free in the next loop too)
                indent = lane.group(1)
                block = [*before, out.pop(), *loop, *after]
                out += [(indent + "{", []), *[("    " + t, n) for t, n in block], (indent + "}", [])]
            else:
                out += loop
        else:
            out[-1:] = _blocks(out[-1], pragma, plain, lines[i:end + 1])
        i = end + 1
    return out


def _blocks(pragma_line: Line, pragma: re.Match, plain: re.Match, loop: list[Line]) -> list[Line]:
    """A plain `omp (parallel for) simd` loop from 0 over contiguous elements run by blocks of BLOCK lanes whose
    float16 conversions go by blocks (a lane loop, `_rewrite`), the last partial block as before; the loop as it
    was when no statement of it converts that way."""
    indent, var, count = plain.groups()
    clauses = pragma.group(3)
    if "reduction(" in clauses or "collapse(" in clauses or "linear(" in clauses:
        return [pragma_line, *loop]
    simdlen = re.search(r"\s*simdlen\(\d+\)", clauses)
    inner_pragma = "#pragma omp simd" + (simdlen.group(0) if simdlen else "")
    body = [(t[len(indent) + 4:] if t.startswith(indent + "    ") else t.lstrip(), n) for t, n in loop[2:-1]]
    lane_loop = [(f"for (int64_t {var}_lane = 0; {var}_lane < {BLOCK}; {var}_lane++)", loop[0][1]), ("{", []),
                 (f"    int64_t {var} = {var}_base + {var}_lane;", []), *[("    " + t, n) for t, n in body],
                 ("}", [])]
    before, new_loop, after = _rewrite(lane_loop, "", var, BLOCK)
    if not before:
        return [pragma_line, *loop]
    outer = []
    if pragma.group(2):  # `parallel for` over the blocks, with the loop's other clauses (its `if` among them)
        other = clauses[:simdlen.start()] + clauses[simdlen.end():] if simdlen else clauses
        outer.append((f"{indent}#pragma omp parallel for{other}", pragma_line[1]))
    full = [*before, (inner_pragma, pragma_line[1]), *new_loop, *after]
    rest = [(inner_pragma, pragma_line[1]), (f"for (int64_t {var} = {var}_base; {var} < {count}; {var}++)",
                                             loop[0][1]), ("{", []), *[("    " + t, n) for t, n in body], ("}", [])]
    return [*outer, (f"{indent}for (int64_t {var}_base = 0; {var}_base < {count}; {var}_base += {BLOCK})", loop[0][1]),
            (f"{indent}{{", []), (f"{indent}    if ({count} - {var}_base >= {BLOCK})", []), (f"{indent}    {{", []),
            *[(f"{indent}        {t}", n) for t, n in full], (f"{indent}    }}", []), (f"{indent}    else", []),
            (f"{indent}    {{", []), *[(f"{indent}        {t}", n) for t, n in rest], (f"{indent}    }}", []),
            (f"{indent}}}", [])]


def _loop_end(lines: list[Line], start: int, indent: str) -> int | None:
    """The index of the line closing the loop whose `for` is lines[start] (its body a `{ }` block)."""
    if start + 1 >= len(lines) or lines[start + 1][0] != indent + "{":
        return None
    for j in range(start + 2, len(lines)):
        if lines[j][0] == indent + "}":
            return j
    return None


def _rewrite(loop: list[Line], indent: str, var: str, lanes: int) -> tuple[list[Line], list[Line], list[Line]]:
    """(lines before the pragma, the loop, lines after it) for one lane loop."""
    body = loop[2:-1]
    if lanes % 16 or not body or body[0][0].strip() != f"int64_t {var} = {var}_base + {var}_lane;" or \
            any(re.search(r"\b(if|for|while) \(|\b(else|break|continue|goto)\b", t) for t, _ in body):
        return [], loop, []
    local = {d.group(1) for t, _ in body if (d := _DEFINED.match(t))} - {var}
    before, after, loaded, written = [], [], [], set()
    for text, nodes in body:  # loads first: a kernel writing in place reads its buffer before the loop then
        load = _LOAD.match(text)
        if load and load.group(3) not in written and (start := _start(load.group(4), var, local)) is not None:
            lead, tmp, ptr = load.group(1), load.group(2), load.group(3)
            before += [(f"{indent}alignas(64) float {tmp}_lanes[{lanes}];", nodes),
                       (f"{indent}lens_fp16_load_lanes<{lanes}>({ptr} + ({start}), {tmp}_lanes);", nodes)]
            loaded.append((f"{lead}auto {tmp} = {tmp}_lanes[{var}_lane];", nodes))
        else:
            loaded.append((text, nodes))
        if (stored := _STORED.match(text)) is not None:
            written.add(stored.group(1))  # (a later load of this buffer reads what this iteration wrote: kept)
    new_body = []
    for i, (text, nodes) in enumerate(loaded):
        store = _STORE.match(text)
        others = "\n".join(t for j, (t, _) in enumerate(loaded) if j != i)
        if store and (start := _start(store.group(3), var, local)) is not None and \
                not re.search(rf"\b{store.group(2)}\b", others):
            lead, dst, value = store.group(1), store.group(2), store.group(4)
            before.append((f"{indent}alignas(64) float {dst}_lanes[{lanes}];", nodes))
            new_body.append((f"{lead}{dst}_lanes[{var}_lane] = {value};", nodes))
            after.append((f"{indent}lens_fp16_store_lanes<{lanes}>({dst} + ({start}), {dst}_lanes);", nodes))
        else:
            new_body.append((text, nodes))
    return before, [*loop[:2], *new_body, loop[-1]], after


def _start(index: str, var: str, local: set[str]) -> str | None:
    """The index's C++ text at the block's first lane when it steps by one element per lane (in `var`, or in
    `var_lane`: a block-local line) and reads no value the loop computes, else None. Plain sums and products
    only (no C++ division, remainder, call or condition, whose meaning sympy would not keep)."""
    names = set(re.findall(r"[A-Za-z_]\w*", index))
    lane = next((v for v in (var, f"{var}_lane") if v in names), None)
    if lane is None or names & local or re.search(r"[%/?:<>&|^~!]|\w\s*\(", index):
        return None
    try:
        expr = sympy.sympify(index, locals={n: sympy.Symbol(n, integer=True) for n in names})
    except (sympy.SympifyError, SyntaxError, TypeError):
        return None
    if sympy.expand(sympy.diff(expr, sympy.Symbol(var, integer=True)) +
                    sympy.diff(expr, sympy.Symbol(f"{var}_lane", integer=True))) != 1:
        return None
    return re.sub(rf"\b{lane}\b", f"{var}_base" if lane == var else "0", index)
