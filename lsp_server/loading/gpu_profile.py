"""A graph's GPU profile from the user's own torch.profiler trace (`*.pt.trace.json` in the program's folder,
up to three folders down): each call of the compiled graph (`## Call CompiledFxGraph ##`) is matched to the
graph whose Triton kernels it launched; Triton kernels are timed by name, extern calls (cuBLAS, ...) through
the CPU op that launched them, in the order the graph's `call()` makes them. Times are per call of the graph;
shares are of the call's wall time (CPU start to the last kernel's end), busy % is the kernels' sum over it.
A graph the trace times takes its kernels' times from the trace (the user's real loop) over `-p` output.
Traces named in the `kernelLens.profilerTraces` setting (files, or folders searched as the program's is) are
looked at after those beside the program, for every graph. A trace written, replaced or deleted after the
server started re-reads the runs it may time (`retimed_runs`: the watcher reports the trace's path)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from lens_format.profile import CategoryTime, GraphProfile, KernelTime
from lsp_server.model import Graph, Kernel, Run
from lsp_server.parsers.profiler_trace import (
    TRACE_SUFFIX,
    GraphCall,
    ProfilerTrace,
    read_profiler_trace,
)

SEARCH_DEPTH = 3
EXTERN_OP = {"extern_kernels.mm": "aten::mm", "extern_kernels.addmm": "aten::addmm", "extern_kernels.bmm": "aten::bmm",
             "extern_kernels.baddbmm": "aten::baddbmm", "extern_kernels.convolution": "aten::convolution"}
SEARCH_REUSE_S = 5.0  # one indexing pass loads many graphs of one program: its folder is walked once
_parsed: dict[Path, tuple[tuple[int, int], ProfilerTrace]] = {}
_searched: dict[Path, tuple[float, list[Path]]] = {}
_named: list[Path] = []  # kernelLens.profilerTraces, absolute (set by the server at initialize)


def set_named_traces(paths: list[Path]) -> None:
    """The traces the user named in the settings: `*.pt.trace.json` files or folders holding them."""
    _named[:] = paths


def named_traces() -> list[Path]:
    return list(_named)


def is_trace_change(path: Path) -> bool:
    """A path the watcher reported that concerns profiler traces: a trace file, or a named folder itself."""
    return path.name.endswith(TRACE_SUFFIX) or path in _named


def may_time(trace: Path, graph: Graph) -> bool:
    """Whether a trace at this path is one `traces_for(graph)` looks at, or the one the graph's profile came from."""
    if not any(k.language == "triton" for k in graph.kernels):
        return False
    if graph.profile is not None and graph.profile.path in (trace, trace.resolve()):
        return True
    program = program_dir(graph)
    if program is not None and program.resolve() in trace.resolve().parents[:SEARCH_DEPTH + 1]:
        return True
    return any(named == trace or named in trace.parents for named in _named)


def retimed_runs(changed: set[Path], runs: list[Run]) -> tuple[list[Run], set[Path]]:
    """After profiler traces changed: the runs they may time (to be read again), and the traces
    to look at again later (half-written: not JSON yet). Forgets the folder walks and the changed files' parses."""
    _searched.clear()
    for path in changed:
        _parsed.pop(path, None)
    retimed = [run for run in runs if any(may_time(p, g) for p in changed for g in run.graphs)]
    unfinished = {p for p in changed if p.is_file() and p.name.endswith(TRACE_SUFFIX)
                  and (trace_at(p).problem or "").startswith("not JSON")}
    return retimed, unfinished


def clear_caches() -> None:
    _parsed.clear()
    _searched.clear()


def program_dir(graph: Graph) -> Path | None:
    """<program>/torch_compile_debug/run_*/torchinductor/<graph> -> <program>; None for any other layout (a run
    written out of a structured trace into a scratch folder has no program folder to search)."""
    parents = graph.path.parents
    if len(parents) > 3 and parents[0].name == "torchinductor" and parents[2].name == "torch_compile_debug":
        return parents[3]
    return None


def find_traces(folder: Path) -> list[Path]:
    """`*.pt.trace.json` files in `folder` and up to SEARCH_DEPTH folders below, newest first (a walk is
    reused for SEARCH_REUSE_S seconds)."""
    now = time.monotonic()
    cached = _searched.get(folder)
    if cached is not None and now - cached[0] < SEARCH_REUSE_S:
        return cached[1]
    _searched[folder] = (now, walk_traces(folder))
    return _searched[folder][1]


def walk_traces(folder: Path) -> list[Path]:
    found: list[Path] = []
    try:
        for depth in range(SEARCH_DEPTH + 1):
            found += folder.glob("/".join(["*"] * depth + [f"*{TRACE_SUFFIX}"]))
        return sorted((p for p in found if p.is_file()), key=lambda p: -p.stat().st_mtime)
    except OSError:  # a folder went away mid-walk: the next index change looks again
        return []


def traces_for(graph: Graph) -> list[Path]:
    """The traces that may time this graph: those beside its program (newest first), then the named ones."""
    program = program_dir(graph)
    found = list(find_traces(program)) if program is not None else []
    for named in _named:
        for path in ([named] if named.is_file() else find_traces(named) if named.is_dir() else []):
            if path not in found:
                found.append(path)
    return found


def trace_version(path: Path) -> tuple[int, int] | None:
    """(modification time, size) of a trace file; None when it is gone."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def trace_at(path: Path) -> ProfilerTrace:
    """Parsed once per file version (modification time and size: a trace replaced within one clock tick)."""
    version = trace_version(path)
    if version is None:  # deleted since the folder was walked: the watcher reports it next
        return ProfilerTrace(path, problem="the file is gone")
    cached = _parsed.get(path)
    if cached is None or cached[0] != version:
        cached = _parsed[path] = (version, read_profiler_trace(path))
    return cached[1]


def graph_calls(trace: ProfilerTrace, graph: Graph) -> list[GraphCall]:
    """The calls that launched this graph's Triton kernels and no Triton kernel of another graph."""
    names = {k.name for k in graph.kernels if k.language == "triton"}
    return [c for c in trace.calls if c.triton_names() and c.triton_names() <= names]


def extern_kernels(graph: Graph) -> list[Kernel]:
    """The graph's extern calls in the order `call()` makes them."""
    externs = [k for k in graph.kernels if k.kind == "extern"]
    return sorted(externs, key=lambda k: min(k.launch_lines or [k.start_line]))


def extern_times(call: GraphCall, externs: list[Kernel]) -> dict[int, float] | None:
    """Per extern Kernel (by position): µs of the device kernels its CPU op launched; None when the call's
    extern ops do not line up with the graph's extern calls."""
    launches: dict[tuple[str, float], float] = {}
    for kernel in call.kernels:
        if kernel.launcher is not None and kernel.launcher != kernel.name and kernel.launcher_ts is not None:
            key = (kernel.launcher, kernel.launcher_ts)
            launches[key] = launches.get(key, 0.0) + kernel.dur
    ordered = sorted(launches.items(), key=lambda item: item[0][1])
    if len(ordered) != len(externs):
        return None
    if any(EXTERN_OP.get(k.name, op) != op for k, ((op, _), _) in zip(externs, ordered)):
        return None
    return {i: us for i, (_, us) in enumerate(ordered)}


def trace_profile(trace: ProfilerTrace, graph: Graph) -> GraphProfile | None:
    """The graph's profile from the trace; sets each matched Kernel's time, share and calls."""
    calls = graph_calls(trace, graph)
    if not calls:
        return None
    n = len(calls)
    wall_ms = sum(c.device_end - c.ts for c in calls) / n / 1000
    triton: dict[str, tuple[int, float]] = {}
    for call in calls:
        for kernel in call.kernels:
            if kernel.launcher == kernel.name:
                count, us = triton.get(kernel.name, (0, 0.0))
                triton[kernel.name] = (count + 1, us + kernel.dur)
    externs = extern_kernels(graph)
    per_call = [extern_times(call, externs) for call in calls]
    extern_us = [sum(t[i] for t in per_call if t) / n if all(per_call) else None for i in range(len(externs))]
    extern_at = {id(k): i for i, k in enumerate(externs)}
    profile = GraphProfile(graph.id, compiled_ms=wall_ms, profiled_ms=wall_ms, iters=n, device="cuda", path=trace.path)
    for kernel in graph.kernels:
        kernel.time_ms = kernel.percent = kernel.calls = None
        if kernel.language == "triton" and kernel.name in triton:
            count, us = triton[kernel.name]
            kernel.time_ms, kernel.calls = us / n / 1000, max(count // n, 1)
        elif id(kernel) in extern_at and extern_us[extern_at[id(kernel)]] is not None:
            kernel.time_ms, kernel.calls = extern_us[extern_at[id(kernel)]] / 1000, 1
        if kernel.time_ms is not None:
            kernel.percent = round(100.0 * kernel.time_ms / wall_ms, 2) if wall_ms else None
            profile.kernels.append(KernelTime(kernel.name, kernel.kind, kernel.calls or 1, kernel.time_ms,
                                              kernel.percent or 0.0))
    categories: dict[str, CategoryTime] = {}
    for timed in profile.kernels:
        share = categories.setdefault(timed.kind, CategoryTime(timed.kind, 0.0, 0.0))
        share.total_ms += timed.total_ms
        share.percent += timed.percent
    profile.categories = sorted(categories.values(), key=lambda c: -c.total_ms)
    busy_ms = sum(t.total_ms for t in profile.kernels)
    profile.busy_percent = round(min(100.0, 100.0 * busy_ms / wall_ms), 2) if wall_ms else None
    return profile


def attach_trace_profile(graph: Graph) -> None:
    """Replace the graph's profile with the newest matching profiler trace's, if one times it."""
    if not any(k.language == "triton" for k in graph.kernels):
        return
    for path in traces_for(graph):
        profile = trace_profile(trace_at(path), graph)
        if profile is not None:
            graph.profile = profile
            return


@dataclass(frozen=True)
class Launch:
    """How the user's loop launched a Triton kernel (every launch alike), from the profiler trace."""
    registers: int | None
    threads: int | None  # per block
    grid: tuple[int, ...] | None


def launch_facts(graph: Graph) -> dict[str, Launch]:
    """Per Triton kernel of the graph: its launches in the newest profiler trace that times the graph, where all
    its launches agree."""
    for path in traces_for(graph):
        calls = graph_calls(trace_at(path), graph)
        if not calls:
            continue
        seen: dict[str, set[Launch]] = {}
        for call in calls:
            for kernel in call.kernels:
                if kernel.launcher == kernel.name:
                    block = kernel.block if kernel.block and len(kernel.block) == 3 else None
                    threads = block[0] * block[1] * block[2] if block else None
                    grid = kernel.grid if kernel.grid and len(kernel.grid) == 3 else None
                    seen.setdefault(kernel.name, set()).add(Launch(kernel.registers, threads, grid))
        return {name: facts.pop() for name, facts in seen.items() if len(facts) == 1}
    return {}
