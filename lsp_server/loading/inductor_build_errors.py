"""Real Inductor C++ build failures of a plain `TORCH_COMPILE_DEBUG=1` run, mapped as `compile_error.json` is:
g++'s line → the kernel in a graph's output_code.py → the FX node of that statement (cpp_statements) → source.

Only `kernel-lens compile` writes compile_error.json for Inductor (from the stderr it saw). After a plain run
the error is on disk in the run's own structured trace, `<torch_compile_debug>/tlparse/*.log` (records of the
same pid), read here incrementally; the failing `.cpp` in Inductor's cache is read while it exists, else the
line g++ echoed identifies the statement.
"""
from __future__ import annotations

import threading
from pathlib import Path

from lens_format.compile_error import CompileDiagnostic, CompileError
from lens_format.jsonio import SourceRef
from lsp_server.loading.cpp_statements import kernel_statements, statement_node
from lsp_server.model import Graph, Kernel, Run, compile_order
from lsp_server.parsers.fx_graph_readable import op_name
from lsp_server.parsers.inductor_build_failure import BuildFailure, GxxDiagnostic, build_failure
from lsp_server.parsers.torch_trace.reader import TraceReader

TLPARSE_DIR = "tlparse"  # where TORCH_COMPILE_DEBUG=1 writes its structured trace, beside the run folders
MAX_CPP_BYTES = 4 << 20


class BuildFailureLogs:
    """One TraceReader per tlparse log (each call reads only appended bytes) and the failures seen in it."""

    def __init__(self) -> None:
        self.readers: dict[str, TraceReader] = {}
        self.failures: dict[str, list[BuildFailure]] = {}
        self.lock = threading.Lock()

    def failures_for(self, debug_dir: Path, pid: int) -> list[BuildFailure]:
        try:
            logs = sorted(str(p) for p in (debug_dir / TLPARSE_DIR).glob("*.log"))
        except OSError:
            return []
        found: list[BuildFailure] = []
        with self.lock:
            for log in logs:
                reader = self.readers.setdefault(log, TraceReader(log))
                generation = reader.generation
                records = reader.read_new()
                if reader.generation != generation:  # replaced or truncated: its old failures are void
                    self.failures[log] = []
                seen = self.failures.setdefault(log, [])
                seen += [failure for record in records if (failure := build_failure(record)) is not None]
                found += [failure for failure in seen if failure.pid == pid]
        return found


LOGS = BuildFailureLogs()


def attach_trace_build_errors(run: Run, debug_dir: Path) -> None:
    """An Inductor run with no compile_error.json: its build failures from the tlparse logs, if any."""
    if run.kind != "inductor" or run.pid is None or any(g.compile_error is not None for g in run.graphs):
        return
    for failure in LOGS.failures_for(debug_dir, run.pid):
        by_graph: dict[str, tuple[Graph, list[CompileDiagnostic]]] = {}
        for diagnostic in failure.diagnostics:
            mapped = map_diagnostic(run.graphs, diagnostic, failure)
            if mapped is not None:
                graph, entry = mapped
                by_graph.setdefault(graph.id, (graph, []))[1].append(entry)
        for graph, entries in by_graph.values():
            graph.compile_error = CompileError(graph.id, failure.command, entries, path=Path(debug_dir / TLPARSE_DIR))
            graph.status = "compile_error"


def map_diagnostic(graphs: list[Graph], diagnostic: GxxDiagnostic,
                   failure: BuildFailure) -> tuple[Graph, CompileDiagnostic] | None:
    """The graph a g++ diagnostic concerns and its contract entry; an error outside any kernel lands on the
    failed function's `def` line (in the run's newest graph)."""
    located = locate(graphs, diagnostic)
    if located is None:
        if diagnostic.severity != "error" or not graphs or not failure.file or failure.def_line is None:
            return None
        graph = max(graphs, key=lambda g: compile_order(g.id))
        source = SourceRef(failure.file, failure.def_line, failure.function, "")
        return graph, CompileDiagnostic(diagnostic.severity, diagnostic.message, diagnostic.file, diagnostic.line,
                                        diagnostic.column, None, "", [], source)
    graph, kernel, line = located
    node = statement_node_at(graph, kernel, line) if diagnostic.severity == "error" else None
    source = graph.nodes[node].source if node is not None else None
    ref = SourceRef(source.file, source.line, source.function, source.code) if source is not None else None
    return graph, CompileDiagnostic(diagnostic.severity, diagnostic.message, diagnostic.file, diagnostic.line,
                                    diagnostic.column, line, kernel.name, [node] if node else [], ref)


def cpp_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(MAX_CPP_BYTES).splitlines()
    except OSError:
        return []


def locate(graphs: list[Graph], diagnostic: GxxDiagnostic) -> tuple[Graph, Kernel, int] | None:
    """(graph, kernel, output_code.py line) of the diagnostic's C++ line. A `cpp_pybinding` kernel's source
    is the `.cpp`'s beginning: its line N is output_code.py line `start + N - 1`."""
    cpp = cpp_lines(diagnostic.file)
    wanted = (cpp[diagnostic.line - 1] if 0 < diagnostic.line <= len(cpp) else diagnostic.code).strip()
    if not wanted:
        return None
    found = []
    for graph in sorted(graphs, key=lambda g: compile_order(g.id), reverse=True):
        for kernel in graph.kernels:
            line = kernel.start_line + diagnostic.line - 1
            if kernel.language == "cpp" and kernel.start_line < line < kernel.end_line \
                    and graph.code_line(line).strip() == wanted:
                found.append((graph, kernel, line))
    if len(found) > 1 and cpp:  # the same statement in several kernels: the one whose source is this .cpp
        found = [f for f in found if same_source(f[0], f[1], cpp)] or found
    return found[0] if found else None


def same_source(graph: Graph, kernel: Kernel, cpp: list[str]) -> bool:
    body = [graph.code_line(n) for n in range(kernel.start_line + 1, kernel.end_line)]
    return cpp[1:1 + len(body)] == body


def statement_node_at(graph: Graph, kernel: Kernel, line: int) -> str | None:
    lines = [graph.code_line(n) for n in range(kernel.start_line, kernel.end_line + 1)]
    found = kernel_statements(lines, line - kernel.start_line)
    if found is None:
        return None
    order = {name: position for position, name in enumerate(graph.nodes)}
    names = sorted((n for n in kernel.nodes if n in graph.nodes), key=order.__getitem__)
    return statement_node(found[0], found[1], [(n, op_name(graph.nodes[n].target)) for n in names])
