"""A compile's guards from its structured trace (the `dynamo_cpp_guards_str` payload, read from the log once per
payload), each with the later compiles whose recompile reason quotes it, and a recompile's causes with the guard
each quotes: what the compiles picker shows."""
from __future__ import annotations

import functools

from lsp_server.model import CompileGuard, RecompileCause
from lsp_server.parsers.torch_trace.compiles import FrameCompile
from lsp_server.parsers.torch_trace.dynamo_guards import DynamoGuard, parse_guard_tree, quoted_guard
from lsp_server.parsers.torch_trace.guard_words import plain_words
from lsp_server.parsers.torch_trace.reader import PayloadRef

GUARDS_PAYLOAD = "dynamo_cpp_guards_str"


@functools.lru_cache(maxsize=4096)
def _guards_at(ref: PayloadRef) -> tuple[DynamoGuard, ...]:
    """A payload's guards (logs only grow, so a payload's place names its text)."""
    try:
        return tuple(parse_guard_tree(ref.text()))
    except OSError:  # the log was removed since it was read
        return ()


def guards_of(fc: FrameCompile) -> tuple[DynamoGuard, ...]:
    ref = fc.artifacts.get(GUARDS_PAYLOAD)
    return _guards_at(ref) if ref is not None else ()


def compile_guards(fc: FrameCompile, siblings: list[FrameCompile]) -> tuple[CompileGuard, ...]:
    """`fc`'s guards, each with the compile ids among `siblings` (the function's compiles on its rank) whose
    recompile reason names `fc` as the cache entry and quotes that guard."""
    guards = guards_of(fc)
    failed: dict[int, list[str]] = {}
    for later in siblings:
        for reason in later.recompile_reasons:
            if reason.cache_entry == fc.compile_id:
                index = quoted_guard(list(guards), reason.reason)
                if index is not None and later.compile_id not in failed.setdefault(index, []):
                    failed[index].append(later.compile_id)
    return tuple(CompileGuard(g, tuple(failed.get(i, ()))) for i, g in enumerate(guards))


def recompile_causes(fc: FrameCompile, siblings: list[FrameCompile]) -> tuple[RecompileCause, ...]:
    """Each recompile reason of `fc` with the code of the guard it quotes in its cache entry's guards."""
    by_id = {other.compile_id: other for other in siblings}
    causes = []
    for reason in fc.recompile_reasons:
        entry = by_id.get(reason.cache_entry or "")
        guards = list(guards_of(entry)) if entry is not None else []
        index = quoted_guard(guards, reason.reason) if guards else None
        causes.append(RecompileCause(reason.cache_entry, plain_words(reason.reason),
                                     guards[index].code if index is not None else None))
    return tuple(causes)
