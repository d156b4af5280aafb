"""Reads the structured-trace logs under the trace roots incrementally (a watcher event reads only the bytes a
log gained) and turns them into what the index holds: TraceFacts for the user's files and trace-only runs.

A trace *run* is the logs one program wrote into one folder (one per rank); for each user file only the newest
run that compiled it counts, so a newer run without a graph break clears the old warning.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from lsp_server.loading.compile_guards import compile_guards, recompile_causes
from lsp_server.loading.trace_runs import TraceRunWriter, default_cache_dir
from lsp_server.model import CompileFact, Run, TraceFacts, TraceFunction, normalize_path
from lsp_server.parsers.torch_trace.compiles import FrameCompile
from lsp_server.parsers.torch_trace.findings import RelatedInfo, trace_diagnostics
from lsp_server.parsers.torch_trace.guard_words import plain_words, size_guards
from lsp_server.parsers.torch_trace.logs_dir import TraceDirectory
from lsp_server.parsers.torch_trace.reader import StackFrame, find_trace_logs
from lsp_server.parsers.torch_trace.summary import FunctionSummary, TraceLog, TraceSummary

TRACE_DIR_NAME = "torch_trace"  # `TORCH_TRACE=./torch_trace`, the default beside each workspace folder


@dataclass
class TraceUpdate:
    """The result of reading logs: the new facts, trace runs to (re)index and run folders to drop."""

    facts: TraceFacts
    runs: list[Run] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)


def trace_runs_of(summary: TraceSummary) -> list[TraceSummary]:
    """Group logs into runs, oldest first: per folder by start time, a new run whenever a rank repeats."""
    by_folder: dict[str, list[TraceLog]] = {}
    for log in summary.logs.values():
        if log.record_count:
            by_folder.setdefault(str(Path(log.path).parent), []).append(log)
    runs: list[TraceSummary] = []
    for logs in by_folder.values():
        current: TraceSummary | None = None
        for log in sorted(logs, key=lambda lg: (lg.first_timestamp, lg.path)):
            if current is None or any(other.rank == log.rank for other in current.logs.values()):
                current = TraceSummary()
                runs.append(current)
            current.logs[log.path] = log
    return sorted(runs, key=lambda run: min(lg.first_timestamp for lg in run.logs.values()))


def trace_function(f: FunctionSummary) -> TraceFunction:
    guards = tuple(f"{g.cache_entry}: {g.reason}" if g.cache_entry else g.reason for g in f.recompile_reasons)
    return TraceFunction(normalize_path(f.file), f.name, f.def_line, f.rank, f.frames, f.graphs, f.ops, f.guards,
                         f.recompiles, len(f.graph_breaks), len(f.failures), f.compile_time_s, f.lens_text(), guards)


LIBRARY_PARTS = ("/site-packages/", "/dist-packages/", "/lib/python3")


def user_caller(fc: FrameCompile) -> StackFrame | None:
    """The innermost frame below the compiled one that is the user's code, not an installed package's."""
    return next((frame for frame in reversed(fc.stack[:-1])
                 if not frame.file.startswith("<") and not any(part in frame.file for part in LIBRARY_PARTS)), None)


def compile_fact(f: FunctionSummary, fc: FrameCompile) -> CompileFact:
    # A frame called from the top level has no caller in its stack; its resume frame (same function, same
    # recompile) does, and that call is the one that started both.
    # Frames inside installed packages (torch's eval_frame.py calling a frame that another compiled frame
    # called) are not the user's call.
    caller = user_caller(fc) or next(
        (found for found in (user_caller(other) for other in f.compiles if other.frame_compile_id ==
                             fc.frame_compile_id and other.compiled_autograd_id == fc.compiled_autograd_id)
         if found), None)
    status = "failed" if fc.failed else "compiled" if fc.has_graph else "no graph"
    return CompileFact(normalize_path(f.file), f.name, f.def_line, f.rank, fc.compile_id,
                       normalize_path(caller.file) if caller else None, caller.line if caller else None,
                       fc.graph_op_count, fc.guard_count, fc.compile_time_s, status, len(fc.graph_breaks),
                       tuple(plain_words(g.reason) for g in fc.recompile_reasons),
                       tuple(g.reason for g in fc.recompile_reasons), tuple(sorted(fc.config.items())),
                       tuple((normalize_path(gb.file or f.file), gb.line or f.def_line, gb.reason)
                             for gb in fc.graph_breaks),
                       compile_guards(fc, f.compiles), recompile_causes(fc, f.compiles),
                       tuple(size_guards([g.reason for g in fc.recompile_reasons])))


def line_texts(functions: list[FunctionSummary]) -> dict[tuple[str, int], str]:
    """Each user line a compile's stack or a graph break's user stack names, with its text as Dynamo recorded it
    (`loc`): what a finding's line is found by again after an edit, in a file no debug directory recorded."""
    texts: dict[tuple[str, int], str] = {}
    for f in functions:
        for fc in f.compiles:
            for frame in [*fc.stack, *(fr for gb in fc.graph_breaks for fr in gb.user_stack)]:
                if frame.code and frame.line and frame.file and not frame.file.startswith("<"):
                    texts[(normalize_path(frame.file), frame.line)] = frame.code.strip()
    return texts


def current_facts(summary: TraceSummary) -> TraceFacts:
    """Facts per user file from the newest run that compiled something in it."""
    facts = TraceFacts(logs=len(summary.logs), skipped_records=summary.skipped_records)
    owner: dict[str, int] = {}
    per_run = []
    for number, run in enumerate(trace_runs_of(summary)):
        users = [f for f in run.functions() if not f.file.startswith("<")]
        functions = [trace_function(f) for f in users]
        compiles = [compile_fact(f, fc) for f in users for fc in f.compiles]
        findings = trace_diagnostics(run)
        for d in findings:
            d.file = normalize_path(d.file)
            d.related = [RelatedInfo(normalize_path(r.file), r.line, r.message) for r in d.related]
        for file in {f.file for f in functions} | {d.file for d in findings}:
            owner[file] = number
        per_run.append((functions, findings, compiles, line_texts(users)))
    for number, (functions, findings, compiles, texts) in enumerate(per_run):
        facts.functions += [f for f in functions if owner.get(f.file) == number]
        facts.compiles += [c for c in compiles if owner.get(c.file) == number]
        facts.findings += [d for d in findings if owner.get(d.file) == number]
        facts.line_texts.update((key, text) for key, text in texts.items() if owner.get(key[0]) == number)
    return facts


class TraceLoader:
    """One TraceDirectory over all trace roots; thread-safe (the watcher thread and the loop thread call it)."""

    def __init__(self, roots: list[Path], cache_dir: Path | None = None) -> None:
        self.roots = roots
        self.directory = TraceDirectory(roots)
        self.writer = TraceRunWriter(cache_dir or default_cache_dir())
        self.lock = threading.Lock()
        self.indexed: set[str] = set()  # logs whose trace run was handed to the index

    def add_root(self, root: Path) -> bool:
        """A trace folder found later (any thread); False when it was a root already."""
        with self.lock:
            if root in self.roots:
                return False
            self.roots = [*self.roots, root]
            self.directory.roots = [*self.directory.roots, root]
            return True

    def owns(self, path: Path) -> bool:
        """Whether a changed path is a trace root or lies under one."""
        return any(path == root or root in path.parents for root in self.roots)

    def refresh_all(self, every_run: bool = False) -> TraceUpdate:
        """Discover logs, read what they gained; `every_run`: return all trace runs (a full reindex)."""
        with self.lock:
            if every_run:
                self.indexed.clear()
            known = set(self.directory.readers)
            present = {str(p) for p in find_trace_logs(self.roots)}
            removed = [self.drop(path) for path in known - present]
            self.directory.refresh()
            return self.update(set(self.directory.readers), removed)

    def refresh_paths(self, paths: set[Path]) -> TraceUpdate:
        """Watcher thread: `paths` are log files (appended, created, deleted) or whole roots (rescan)."""
        if any(path in self.roots for path in paths):
            return self.refresh_all()
        with self.lock:
            removed, touched = [], set()
            for path in paths:
                if path.suffix != ".log":
                    continue
                if path.is_file():
                    self.directory.refresh_log(path)
                    touched.add(str(path))
                elif str(path) in self.directory.readers:
                    removed.append(self.drop(str(path)))
            return self.update(touched, removed)

    def drop(self, path: str) -> Path:
        self.directory.forget(path)
        self.indexed.discard(path)
        return self.writer.forget(path)

    def update(self, touched: set[str], removed: list[Path]) -> TraceUpdate:
        result = TraceUpdate(current_facts(self.directory.summary), removed=removed)
        for path in sorted(touched):
            log = self.directory.summary.logs.get(path)
            if log is None:
                continue
            run, changed = self.writer.update(log)
            if run is not None and (changed or path not in self.indexed):
                result.runs.append(run)  # reparsed only when its graph files changed
                self.indexed.add(path)
        return result

    def facts(self) -> TraceFacts:
        with self.lock:
            return current_facts(self.directory.summary)
