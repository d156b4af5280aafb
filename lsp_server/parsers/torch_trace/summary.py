"""The structured-trace summary: all logs read so far, built incrementally from TraceRecords, and
per-function figures (graphs, ops, graph breaks, recompiles, compile time) for lenses and hovers.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from lsp_server.parsers.torch_trace.compiles import FrameCompile, InductorGraph, TraceLog
from lsp_server.parsers.torch_trace.payloads import FailedGuard, GraphBreak
from lsp_server.parsers.torch_trace.reader import SkippedRecord, TraceRecord

__all__ = ["FrameCompile", "FunctionSummary", "InductorGraph", "TraceLog", "TraceSummary"]


@dataclass(slots=True)
class FunctionSummary:
    """A user function's compiles on one rank, resume frames included (what a code lens shows)."""
    rank: int | None
    file: str
    name: str
    def_line: int
    compiles: list[FrameCompile] = field(default_factory=list)

    def latest_per_frame(self) -> list[FrameCompile]:
        latest: dict[tuple[int | None, int], FrameCompile] = {}
        for fc in self.compiles:
            key = (fc.compiled_autograd_id, fc.frame_id)
            if key not in latest or fc.frame_compile_id > latest[key].frame_compile_id:
                latest[key] = fc
        return sorted(latest.values(), key=lambda fc: (fc.frame_id, fc.frame_compile_id))

    @property
    def frames(self) -> int:
        return len({(fc.compiled_autograd_id, fc.frame_id) for fc in self.compiles})

    @property
    def graphs(self) -> int:
        """Graphs the function is split into (latest compile of each frame)."""
        return sum(1 for fc in self.latest_per_frame() if fc.has_graph)

    @property
    def ops(self) -> int:
        return sum(fc.graph_op_count or 0 for fc in self.latest_per_frame() if fc.has_graph)

    @property
    def guards(self) -> int:
        return sum(fc.guard_count or 0 for fc in self.latest_per_frame() if fc.has_graph)

    @property
    def recompiles(self) -> int:
        """How many times the function was compiled again after its first compile."""
        return max((fc.frame_compile_id for fc in self.compiles), default=0)

    @property
    def recompile_reasons(self) -> list[FailedGuard]:
        seen: list[FailedGuard] = []
        for fc in sorted(self.compiles, key=lambda fc: (fc.frame_compile_id, fc.frame_id)):
            seen.extend(g for g in fc.recompile_reasons if g not in seen)
        return seen

    @property
    def graph_breaks(self) -> list[GraphBreak]:
        """Unique graph breaks by location (a recompile logs the same break again)."""
        unique: dict[tuple[str | None, int | None], GraphBreak] = {}
        for fc in self.compiles:
            for gb in fc.graph_breaks:
                unique.setdefault((gb.file, gb.line), gb)
        return list(unique.values())

    @property
    def failures(self) -> list[FrameCompile]:
        return [fc for fc in self.compiles if fc.failed]

    @property
    def compile_time_s(self) -> float:
        return sum(fc.compile_time_s or 0.0 for fc in self.compiles)

    @property
    def graph_hashes(self) -> tuple[str, ...]:
        return tuple(sorted(fc.graph_hash for fc in self.latest_per_frame() if fc.graph_hash))

    @property
    def collectives(self) -> tuple[str, ...]:
        """The collectives its compiled graphs launch, in frame order (latest compile of each frame)."""
        return tuple(op for fc in self.latest_per_frame() if fc.has_graph for op in fc.collectives())

    def lens_text(self) -> str:
        """e.g. "2 graphs · 5 ops · 1 graph break · recompiled 1× · 0.5 s compile"."""
        parts = [_plural(self.graphs, "graph"), _plural(self.ops, "op")]
        if self.graph_breaks:
            parts.append(_plural(len(self.graph_breaks), "graph break"))
        if self.recompiles:
            parts.append(f"recompiled {self.recompiles}×")
        if self.failures:
            parts.append(_plural(len(self.failures), "failed compile"))
        parts.append(f"{self.compile_time_s:.1f} s compile")
        return " · ".join(parts)


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


class TraceSummary:
    """All logs read so far, keyed by path; add records as they arrive (`add`), drop a log that restarted."""

    def __init__(self) -> None:
        self.logs: dict[str, TraceLog] = {}

    def add(self, records: Iterable[TraceRecord]) -> None:
        for rec in records:
            log = self.logs.get(rec.source)
            if log is None:
                log = self.logs[rec.source] = TraceLog(rec.source)
            log.add(rec)

    def drop_log(self, path: str) -> None:
        self.logs.pop(path, None)

    def note_skipped(self, path: str, count: int, skipped: list[SkippedRecord]) -> None:
        """Record the reader's count of unreadable records for a log (exposed, never fatal)."""
        log = self.logs.setdefault(path, TraceLog(path))
        log.skipped_count, log.skipped = count, list(skipped)

    @property
    def skipped_records(self) -> int:
        return sum(log.skipped_count for log in self.logs.values())

    def rank_logs(self) -> dict[int | None, TraceLog]:
        """One log per rank: the newest when several runs wrote into the same folder."""
        chosen: dict[int | None, TraceLog] = {}
        for log in sorted(self.logs.values(), key=lambda lg: (lg.first_timestamp, lg.path)):
            if log.record_count:
                chosen[log.rank] = log
        return dict(sorted(chosen.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))

    def compiles(self) -> list[FrameCompile]:
        return [fc for log in self.logs.values() for fc in log.compiles.values()]

    def functions(self) -> list[FunctionSummary]:
        """Per (log, user function): its compiles, resume frames attributed to the function they continue."""
        result: list[FunctionSummary] = []
        for log in self.logs.values():
            roots = {(fc.co_filename, fc.co_name): fc.co_firstlineno or 0
                     for fc in log.compiles.values() if not fc.is_resume and fc.co_name}
            grouped: dict[tuple[str, str, int], FunctionSummary] = {}
            for fc in sorted(log.compiles.values(), key=lambda fc: (fc.frame_id, fc.frame_compile_id)):
                name = fc.function_name or "<unknown>"
                file = fc.co_filename or "<unknown>"
                line = roots.get((file, name), fc.co_firstlineno or 0)
                key = (file, name, line)
                if key not in grouped:
                    grouped[key] = FunctionSummary(log.rank, file, name, line)
                grouped[key].compiles.append(fc)
            result.extend(grouped.values())
        return sorted(result, key=lambda f: (f.rank is None, f.rank or 0, f.file, f.def_line, f.name))
