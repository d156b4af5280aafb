"""What a structured trace says about the user's lines: graph breaks, recompiles and compile failures as
diagnostics data (no LSP types), and where ranks diverge (a break, recompile or graph on some ranks only, or
the collectives their compiled graphs launch in another order: ranks that disagree on it hang or mix up tensors).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from lsp_server.parsers.torch_trace.guard_words import plain_words
from lsp_server.parsers.torch_trace.payloads import QuickFix
from lsp_server.parsers.torch_trace.summary import FunctionSummary, TraceSummary

Rank = int | None
MAX_STACK_RELATED = 4  # innermost callers shown with a graph break (spawned ranks add runtime frames)
# divergence kind -> how the message reads
DIVERGENCE_WORDING = {
    "graph_break": "graph break only on ranks {with_}, not on {without}",
    "recompile": "recompiles differ: ranks {with_} vs {without}",
    "compile_failure": "compile failures differ: ranks {with_} vs {without}",
    "graph": "different graphs on ranks {with_} than on {without}",
    "missing": "compiled only on ranks {with_}, not on {without}",
    "collective_order": "collectives in another order on ranks {with_} than on {without}",
}


@dataclass(frozen=True, slots=True)
class RelatedInfo:
    """A secondary location/message of a diagnostic (explanation, hint, failed guard, stack frame)."""
    file: str
    line: int
    message: str


@dataclass(slots=True)
class TraceDiagnostic:
    """One finding at a user's line; `kind` is graph_break | recompile | compile_failure | rank_divergence."""
    kind: str
    severity: str  # error | warning | information
    file: str
    line: int
    message: str
    function: str | None = None
    related: list[RelatedInfo] = field(default_factory=list)
    quick_fix: QuickFix | None = None
    ranks: list[Rank] = field(default_factory=list)


@dataclass(slots=True)
class RankDivergence:
    """A function that compiled differently on some ranks; `kind` is graph_break | recompile |
    compile_failure | graph | missing | collective_order."""
    kind: str
    file: str
    line: int
    function: str
    ranks_with: list[Rank]
    ranks_without: list[Rank]
    detail: str


def _function_key(f: FunctionSummary) -> tuple[str, str, int]:
    return (f.file, f.name, f.def_line)


def _by_function(summary: TraceSummary) -> dict[tuple[str, str, int], dict[Rank, FunctionSummary]]:
    rank_paths = {log.path for log in summary.rank_logs().values()}
    table: dict[tuple[str, str, int], dict[Rank, FunctionSummary]] = {}
    for f in summary.functions():
        if any(fc.source in rank_paths for fc in f.compiles):
            table.setdefault(_function_key(f), {})[f.rank] = f
    return table


def _break_divergences(key, per_rank, all_ranks) -> list[RankDivergence]:
    found = []
    locations = {(gb.file, gb.line): gb for f in per_rank.values() for gb in f.graph_breaks}
    for (file, line), gb in sorted(locations.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0)):
        with_ = [r for r in all_ranks if r in per_rank and any(
            (g.file, g.line) == (file, line) for g in per_rank[r].graph_breaks)]
        if len(with_) != len(all_ranks):
            found.append(RankDivergence("graph_break", file or key[0], line or key[2], key[1], with_,
                                        [r for r in all_ranks if r not in with_], gb.reason))
    return found


def _figure_divergence(kind: str, figure: Callable[[FunctionSummary], object], describe: Callable[[object], str]):
    def check(key, per_rank, all_ranks) -> list[RankDivergence]:
        values = {r: figure(per_rank[r]) for r in all_ranks if r in per_rank}
        if len(set(values.values())) <= 1:
            return []
        # the value most ranks share; on a tie the lowest rank's (a set's order is no tie-break: it varies by run)
        common = max(values.values(), key=lambda v: (sum(1 for x in values.values() if x == v),
                                                     -min(r for r, x in values.items() if x == v)))
        odd = [r for r, v in values.items() if v != common]
        detail = "; ".join(f"rank {r}: {describe(v)}" for r, v in values.items())
        return [RankDivergence(kind, key[0], key[2], key[1], odd, [r for r in values if r not in odd], detail)]
    return check


def _missing_divergence(key, per_rank, all_ranks) -> list[RankDivergence]:
    if len(per_rank) == len(all_ranks):
        return []
    with_ = [r for r in all_ranks if r in per_rank]
    return [RankDivergence("missing", key[0], key[2], key[1], with_, [r for r in all_ranks if r not in with_],
                           f"compiled on ranks {with_} only")]


# each check compares one figure of a function across ranks
DIVERGENCE_CHECKS = (
    _missing_divergence,
    _break_divergences,
    _figure_divergence("recompile", lambda f: f.recompiles, lambda v: f"recompiled {v}×"),
    _figure_divergence("compile_failure", lambda f: tuple(sorted({fc.fail_type for fc in f.failures})),
                       lambda v: ", ".join(v) or "no failure"),
    _figure_divergence("graph", lambda f: f.graph_hashes, lambda v: f"{len(v)} graph(s) {_short(v)}"),
    _figure_divergence("collective_order", lambda f: f.collectives, lambda v: ", ".join(v) or "no collective"),
)


def _short(hashes: object) -> str:
    return "[" + ", ".join(h[:8] for h in hashes) + "]" if isinstance(hashes, tuple) else str(hashes)


def find_divergences(summary: TraceSummary) -> list[RankDivergence]:
    """Where ranks compiled the same function differently (needs at least two ranked logs)."""
    all_ranks = [r for r in summary.rank_logs() if r is not None]
    if len(all_ranks) < 2:
        return []
    found: list[RankDivergence] = []
    for key, per_rank in sorted(_by_function(summary).items()):
        per_rank = {r: f for r, f in per_rank.items() if r is not None}
        for check in DIVERGENCE_CHECKS:
            found.extend(check(key, per_rank, all_ranks))
    return found


def _graph_break_diagnostics(summary: TraceSummary) -> list[TraceDiagnostic]:
    """One diagnostic per break location, deduplicated across frames, recompiles and ranks, with how many
    compiled frames hit it when more than one did."""
    merged: dict[tuple[str, int], TraceDiagnostic] = {}
    frames: dict[tuple[str, int], set] = {}
    for f in summary.functions():
        for gb in f.graph_breaks:
            file, line = gb.file or f.file, gb.line or f.def_line
            diag = merged.get((file, line))
            if diag is None:
                related = [RelatedInfo(file, line, gb.explanation)] if gb.explanation else []
                related += [RelatedInfo(file, line, f"Hint: {h}") for h in gb.hints]
                related += [RelatedInfo(fr.file, fr.line, f"called from {fr.name}")
                            for fr in gb.user_stack[-MAX_STACK_RELATED - 1:-1]]
                diag = merged[(file, line)] = TraceDiagnostic(
                    "graph_break", "warning", file, line, f"Graph break: {gb.reason}", f.name, related,
                    gb.quick_fix)
            if f.rank not in diag.ranks:
                diag.ranks.append(f.rank)
        for fc in f.compiles:
            for gb in fc.graph_breaks:
                key = (gb.file or f.file, gb.line or f.def_line)
                frames.setdefault(key, set()).add((f.rank, fc.compiled_autograd_id, fc.frame_id))
    for key, diag in merged.items():
        seen = frames.get(key, set())
        if len(seen) > 1:
            ranks = len({rank for rank, _, _ in seen})
            diag.message += f" (in {len(seen)} frames" + (f" on {ranks} ranks)" if ranks > 1 else ")")
    return list(merged.values())


def _recompile_diagnostics(summary: TraceSummary) -> list[TraceDiagnostic]:
    merged: dict[tuple[str, int, str], TraceDiagnostic] = {}
    for f in summary.functions():
        if not f.recompiles:
            continue
        reasons = f.recompile_reasons
        message = f"{f.name} recompiled {f.recompiles}×" + (
            f": {plain_words(reasons[0].reason)} (failed guard `{reasons[0].reason}`)" if reasons else "")
        key = (f.file, f.def_line, message)
        if key not in merged:
            related = [RelatedInfo(f.file, f.def_line, f"guard failed ({g.cache_entry or '?'}): {plain_words(g.reason)}"
                                               f" — `{g.reason}`") for g in reasons]
            merged[key] = TraceDiagnostic("recompile", "information", f.file, f.def_line, message, f.name,
                                          related)
        merged[key].ranks.append(f.rank)
    return list(merged.values())


def _failure_diagnostics(summary: TraceSummary) -> list[TraceDiagnostic]:
    merged: dict[tuple[str, int, str], TraceDiagnostic] = {}
    for f in summary.functions():
        for fc in f.failures:
            file, line = fc.fail_file or f.file, fc.fail_line or f.def_line
            message = f"Compile failed: {fc.failure_headline()}"
            reason_lines = [ln.strip() for ln in (fc.fail_reason or "").splitlines() if ln.strip()]
            key = (file, line, message)
            if key not in merged:
                related = [RelatedInfo(file, line, ln) for ln in reason_lines if ln not in message]
                merged[key] = TraceDiagnostic("compile_failure", "error", file, line, message, f.name, related)
            if f.rank not in merged[key].ranks:
                merged[key].ranks.append(f.rank)
    return list(merged.values())


LIBRARY_MARKS = ("/site-packages/", "/dist-packages/")


def _user_site(summary: TraceSummary, d: RankDivergence) -> tuple[str, int]:
    """Where a divergence shows: its function's line, or where the compiled function is a library's (a module
    compiled and wrapped in DDP compiles torch's `inner`), the innermost user frame that called it."""
    if not any(mark in d.file for mark in LIBRARY_MARKS):
        return d.file, d.line
    for f in summary.functions():
        if (f.file, f.name) != (d.file, d.function):
            continue
        for fc in f.compiles:
            frame = next((s for s in reversed(fc.stack) if not any(m in s.file for m in LIBRARY_MARKS)), None)
            if frame is not None:
                return frame.file, frame.line
    return d.file, d.line


def _divergence_diagnostics(summary: TraceSummary) -> list[TraceDiagnostic]:
    found = []
    for d in find_divergences(summary):
        file, line = _user_site(summary, d)
        related = [RelatedInfo(d.file, d.line, d.detail)]
        if (file, line) != (d.file, d.line):
            related.append(RelatedInfo(d.file, d.line, f"the compiled function `{d.function}` (a library's)"))
        found.append(TraceDiagnostic("rank_divergence", "warning", file, line,
                                     f"Ranks diverge in {d.function}: " + DIVERGENCE_WORDING[d.kind].format(
                                         with_=d.ranks_with, without=d.ranks_without), d.function,
                                     related, None, list(d.ranks_with)))
    return found


DIAGNOSTIC_SOURCES = (_graph_break_diagnostics, _recompile_diagnostics, _failure_diagnostics,
                      _divergence_diagnostics)


def trace_diagnostics(summary: TraceSummary) -> list[TraceDiagnostic]:
    """Every finding, sorted by file and line; the server turns these into LSP diagnostics."""
    found = [d for source in DIAGNOSTIC_SOURCES for d in source(summary)]
    return sorted(found, key=lambda d: (d.file, d.line, d.kind))
