"""Cutting a generated translation unit into parts that g++ compiles at the same time, one per core, each
kernel whole: a graph of several kernels then builds in about the time of its largest part plus a link.

Why: optimizing the kernels is almost all of a cold build (the prelude parses in ~10 ms; a transformer encoder
layer's five kernels took 222-318 ms in one g++ and 146-177 ms in two, linked, on 2 cores here). Every unit
keeps its lines of the full source through `#line`, so diagnostics, compile-error mapping and the
vectorization report read as if one file had been compiled.
"""
from __future__ import annotations

import os
import re

from compiler import config

# each kernel's first line (codegen/cpp.py), and each size variant's (codegen/strategies/size_variants.py), at a line's start
KERNEL_START = 'extern "C" void '


def jobs() -> int:
    """How many g++ may run at once (config.cpp.build_jobs, else the cores this process may run on)."""
    if config.cpp.build_jobs > 0:
        return config.cpp.build_jobs
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def units(rest: str, first_line: int) -> list[tuple[int, str]]:
    """The text after the prelude cut before each kernel but the first, as (line of its first line in the
    full source, text). What precedes the first kernel (the fast expf's definitions until their object is
    built) stays with it: as a part of its own it made a one-kernel build slower, not faster, on 2 cores
    (two g++ parsing the prelude beside the background builds of the precompiled prelude and that object)."""
    lines = rest.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith(KERNEL_START)][1:]
    return [(first_line + a, "".join(lines[a:b])) for a, b in zip([0, *starts], [*starts, len(lines)])]


_NAME = re.compile(r'^extern "C" void (\w+)\(.*$', re.M)
_COMMENT = re.compile(r"//[^\n]*")
# a kernel's own buffers (codegen names them after the graph's buffer: `buf44_local`, `buf44_local_lanes`): one
# layer's kernel and the next layer's differ only in those names
_LOCAL = re.compile(r"\bbuf\d+_local")


def _renamer():
    """A substitution naming each kernel-local buffer by its order of first appearance (`\1local0`, ...)."""
    names: dict[str, str] = {}
    return lambda m: names.setdefault(m.group(0), f"\1local{len(names)}")


def deduplicated(found: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Kernels whose text differs only in their name, comments and the names of their own local buffers (a deep
    model's layers: 66 kernels of 19 distinct bodies in a 4-layer MobileBERT; BART's 87 kernels, 43 distinct by
    text, 9 once locals are renamed) compiled once: each copy becomes an alias of the first, declared
    after it in its unit (an alias must be defined in the same translation unit)."""
    first: dict[str, int] = {}
    kept: list[list] = []
    for line, text in found:
        name = _NAME.search(text)
        if name is None:
            kept.append([line, text])
            continue
        kernel = text[name.start():]  # (the first unit also holds the code before the first kernel)
        key = _LOCAL.sub(_renamer(), " ".join(_COMMENT.sub("", kernel.replace(name.group(1), "\0")).split()))
        orig_name = _NAME.search(kept[first[key]][1]).group(1) if key in first else None
        if orig_name not in (None, name.group(1)):
            original = kept[first[key]]
            original[1] += f'{name.group(0).rstrip()} __attribute__((alias("{orig_name}")));\n'
            continue
        first[key] = len(kept)
        kept.append([line, text])
    return [(line, text) for line, text in kept]


def parts(rest: str, first_line: int, src_path: str, max_parts: int) -> list[str] | None:
    """Up to `max_parts` bodies to compile after the prelude, each unit after a `#line` naming its place in
    `src_path`; units go largest first into the smallest part (their text's length stands for their g++
    time). None when there are fewer than two units or parts: one g++ is then as fast. Identical kernels are
    compiled once (`deduplicated`), except in debug mode, whose vectorization report names every kernel."""
    found = units(rest, first_line)
    if not config.debug:
        found = deduplicated(found)
    n = min(max_parts, len(found))
    if n < 2:
        return None
    bodies: list[list[tuple[int, str]]] = [[] for _ in range(n)]
    sizes = [0] * n
    for line, text in sorted(found, key=lambda u: len(u[1]), reverse=True):
        k = sizes.index(min(sizes))
        bodies[k].append((line, text))
        sizes[k] += len(text)
    return ["".join(f'#line {line} "{src_path}"\n{text}' for line, text in sorted(body)) for body in bodies]
