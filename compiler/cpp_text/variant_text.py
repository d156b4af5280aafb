"""The C++ text of a kernel's size variants (compiler/codegen/strategies/size_variants.py) that the build reads: the kernel
calls its variants between `VARIANTS_BEGIN` and `VARIANTS_END`, then runs its generic body,

    extern "C" void k_v0(...) { ... }            (each variant a function of its own)
    extern "C" void k(...)
    {
        void k_v0(...);
    #ifndef LENS_GENERIC_ONLY
        if (s27 == 1024 && s77 >= 4096) k_v0(...);
        else
    #endif
        {
            generic body
        }
    }

so that `generic_only` can give the same source without them: the text a cold first call builds first (its
variants' g++ time, ~70 ms of a dynamic softmax's 180 on 2 cores, not waited for), while the whole source builds
in the background (compiler/machine/runtime.py). Plain text, no compiler imports: the machine side reads it.
"""
from __future__ import annotations

import re

VARIANTS_BEGIN = "#ifndef LENS_GENERIC_ONLY"
VARIANTS_END = "#endif  // LENS_GENERIC_ONLY"
_VARIANT_START = re.compile(r'^extern "C" void \w+_v\d+\(')


def generic_only(source: str) -> str | None:
    """`source` with its kernels' size variants left out (their functions' lines blanked, so that every other
    line keeps its number for diagnostics and the kernel map; their calls skipped by the preprocessor), or None
    when no kernel of it has variants that a generic body backs."""
    if VARIANTS_BEGIN not in source:
        return None
    lines = source.split("\n")
    out, in_variant = [], False
    for line in lines:
        if not in_variant and _VARIANT_START.match(line):
            in_variant = True
        if in_variant:
            out.append("")
            in_variant = line != "}"
            continue
        out.append("#if 0  // LENS_GENERIC_ONLY" if line == VARIANTS_BEGIN else line)
    return "\n".join(out)
