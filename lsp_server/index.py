"""The one model LSP features read: runs with reverse maps (source line → kernels and generated lines), and
the structured-trace facts (per-function compile figures, graph breaks, recompiles, failures).

A source file is answered from the selected run when it covers the file, else from the newest run that does;
a trace run yields to a debug-directory run of the same process (the debug directory has more: profiles).
"""
from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field
from pathlib import Path

from lens_format.why import WhyRecord
from lsp_server.model import (
    FxNode,
    Graph,
    Kernel,
    KernelLine,
    READABLE_GRAPH,
    Run,
    SourceLocation,
    TraceFacts,
    TraceFunction,
    compile_order,
    normalize_path,
)
from lsp_server.parsers.torch_trace.compiles import resumed_function

SourceKey = tuple[str, int]


@dataclass
class KernelRef:
    run: Run
    graph: Graph
    kernel: Kernel


@dataclass
class LineHit:
    """A kernel that computes (part of) a source line, and the generated lines that do it."""

    ref: KernelRef
    generated_lines: list[int]
    nodes: list[str]


@dataclass
class WhyHit:
    """A "why" record shown on a source line: the graph it is about and the node whose line that is."""

    graph: Graph
    record: WhyRecord
    node: str


@dataclass
class FunctionGraph:
    """A graph holding (some of) a function's FX nodes, and how those nodes run (notes.txt, kernel kinds)."""

    graph: Graph
    native: list[str]  # computed by generated kernels
    aten: list[str]  # run as ATen calls (extern kernels)
    eager: str | None  # why the whole graph runs eagerly (no generated code), when it does
    function: str = ""  # the user's function (Dynamo's continuation `torch_dynamo_resume_in_f_at_N` is f's code…)
    resumed_after: int | None = None  # …after its graph break at line N)


@dataclass
class GeneratedFile:
    """Lookup tables for one graph's output_code.py."""

    run: Run
    graph: Graph
    starts: list[int] = field(default_factory=list)
    spans: list[Kernel] = field(default_factory=list)
    line_nodes: dict[int, KernelLine] = field(default_factory=dict)
    outside_lines: dict[int, Kernel] = field(default_factory=dict)  # launches in call() and other mapped lines

    def kernel_at(self, line: int) -> Kernel | None:
        at = bisect.bisect_right(self.starts, line) - 1
        kernel = self.spans[at] if at >= 0 else None
        if kernel is not None and line <= kernel.end_line:
            return kernel
        return self.outside_lines.get(line)


@dataclass
class RunView:
    """Reverse maps of one run."""

    run: Run
    by_source_line: dict[SourceKey, list[LineHit]] = field(default_factory=dict)
    by_function: dict[tuple[str, str], list[KernelRef]] = field(default_factory=dict)
    line_share: dict[SourceKey, float] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)
    graphs_by_function: dict[tuple[str, str], list[FunctionGraph]] = field(default_factory=dict)  # compile order
    why_by_line: dict[SourceKey, list[WhyHit]] = field(default_factory=dict)
    line_ms: dict[SourceKey, float] = field(default_factory=dict)  # ms per iteration, split as line_share is
    memo: dict = field(default_factory=dict)  # answers features derive from this view; dropped with it
    line_text: dict[SourceKey, str] = field(default_factory=dict)  # each recorded line's text at compile time
    nodes_by_line: dict[SourceKey, list[tuple[Graph, str]]] = field(default_factory=dict)  # every graph's nodes
    # a caller's line (an outer frame of a node's stack) -> the kernels of the code it called, with the callee frame
    by_caller_line: dict[SourceKey, list[tuple[LineHit, SourceLocation]]] = field(default_factory=dict)


def function_graphs(graph: Graph) -> dict[tuple[str, str], FunctionGraph]:
    """(file, function) → this graph's nodes from that function's code (any frame), native or ATen."""
    extern = {n for k in graph.kernels if k.kind == "extern" for n in k.nodes} | {e.node for e in graph.notes.externs}
    native = {n for k in graph.kernels if k.kind != "extern" for n in k.nodes} - extern
    found: dict[tuple[str, str], FunctionGraph] = {}
    for node in graph.nodes.values():
        for frame in node.frames:
            entry = found.get((frame.file, frame.function))
            if entry is None:
                entry = found[frame.file, frame.function] = FunctionGraph(graph, [], [], graph.eager_reason,
                                                                          *resumed_function(frame.function))
            for names, kind in ((entry.native, native), (entry.aten, extern)):
                if node.name in kind and node.name not in names:
                    names.append(node.name)
    return found


def build_view(run: Run) -> RunView:
    view = RunView(run)
    for graph in run.graphs:
        for kernel in graph.kernels:
            ref = KernelRef(run, graph, kernel)
            lines_touched: set[SourceKey] = set()
            for name in kernel.nodes:
                node = graph.nodes.get(name)
                if node is None:
                    continue
                generated = [kl.line for kl in kernel.lines if name in kl.nodes] or [kernel.start_line]
                for frame in node.frames:
                    key = (frame.file, frame.line)
                    view.files.add(frame.file)
                    if node.source is not None and frame != node.source:  # a caller's line: via its call
                        add_hit(view.by_caller_line.setdefault(key, []), ref, generated, name, node.source)
                        continue
                    add_hit(view.by_source_line.setdefault(key, []), ref, generated, name)
                    refs = view.by_function.setdefault((frame.file, frame.function), [])
                    if not any(r.kernel is kernel and r.graph is graph for r in refs):
                        refs.append(ref)
                if node.source is not None:
                    lines_touched.add((node.source.file, node.source.line))
            if kernel.percent and lines_touched:
                for key in lines_touched:
                    view.line_share[key] = view.line_share.get(key, 0.0) + kernel.percent / len(lines_touched)
            if kernel.time_ms and lines_touched:
                for key in lines_touched:
                    view.line_ms[key] = view.line_ms.get(key, 0.0) + kernel.time_ms / len(lines_touched)
        add_why(view, graph)
        add_nodes(view, graph)
    for graph in sorted(run.graphs, key=lambda g: compile_order(g.id)):
        for key, entry in function_graphs(graph).items():
            view.files.add(key[0])  # a run that ran the file's code eagerly answers for it too
            view.graphs_by_function.setdefault(key, []).append(entry)
    return view


def function_label(name: str) -> str:
    """A frame's function as the user wrote it: Dynamo's continuation `torch_dynamo_resume_in_f_at_N` is `f`
    (after its graph break at line N)."""
    function, line = resumed_function(name)
    return name if line is None else f"{function} (after its graph break at line {line})"


def add_hit(hits: list, ref: KernelRef, generated: list[int], name: str,
            callee: SourceLocation | None = None) -> None:
    """One more node of `ref`'s kernel on a line: the kernel's entry grows (by_caller_line entries carry the
    callee's frame: one per kernel and callee line)."""
    for entry in hits:
        hit = entry[0] if callee is not None else entry
        if hit.ref.kernel is ref.kernel and hit.ref.graph is ref.graph and (callee is None or entry[1] == callee):
            hit.generated_lines = sorted(set(hit.generated_lines) | set(generated))
            hit.nodes.append(name)
            return
    hit = LineHit(ref, sorted(set(generated)), [name])
    hits.append(hit if callee is None else (hit, callee))


def add_nodes(view: RunView, graph: Graph) -> None:
    """Every node of the graph (kernels or not: an eager graph's too) on its source line, and each recorded
    line's text at compile time (positions follow edits through it)."""
    for node in graph.nodes.values():
        for frame in node.frames:
            if frame.code:
                view.line_text.setdefault((frame.file, frame.line), frame.code.strip())
        if node.source is not None:
            view.nodes_by_line.setdefault((node.source.file, node.source.line), []).append((graph, node.name))


def why_node(graph: Graph, record: WhyRecord) -> FxNode | None:
    """The node whose source line shows `record`: its first node that has a line. A `reused` record's nodes are
    the folded node, then the kept one (another statement): only the folded node's line shows it, and a folded node
    without a line shows it nowhere (the kept node's line would say the wrong statement repeats)."""
    names = record.nodes[:1] if record.kind == "reused" else record.nodes
    return next((graph.nodes[n] for n in names if n in graph.nodes and graph.nodes[n].source), None)


def add_why(view: RunView, graph: Graph) -> None:
    """The graph's why-records on the source line of the node that shows them (the same words once)."""
    for record in graph.why:
        node = why_node(graph, record)
        if node is None or node.source is None:
            continue
        key = (node.source.file, node.source.line)
        view.files.add(key[0])
        hits = view.why_by_line.setdefault(key, [])
        if not any(h.record.message == record.message and h.node == node.name for h in hits):
            hits.append(WhyHit(graph, record, node.name))


def build_generated_file(run: Run, graph: Graph) -> GeneratedFile:
    spans = sorted((k for k in graph.kernels), key=lambda k: k.start_line)
    table = GeneratedFile(run, graph, [k.start_line for k in spans], spans)
    for kernel in graph.kernels:
        for kernel_line in kernel.lines:
            table.line_nodes.setdefault(kernel_line.line, kernel_line)
            if not kernel.start_line <= kernel_line.line <= kernel.end_line:
                table.outside_lines.setdefault(kernel_line.line, kernel)
        for line in kernel.launch_lines:
            table.outside_lines.setdefault(line, kernel)
    return table


class Index:
    """Runs keyed by id; features ask it questions and never read debug files themselves."""

    def __init__(self) -> None:
        self.views: dict[str, RunView] = {}
        self.selected_run_id: str | None = None
        self.generated: dict[str, GeneratedFile] = {}
        self.readable: dict[str, tuple[Run, Graph]] = {}
        self.trace = TraceFacts()
        self._ids = itertools.count(2)

    # -- updates ------------------------------------------------------------------------------------
    def put_run(self, run: Run) -> None:
        """Add or replace (by folder) a run."""
        old = self.run_at_path(run.path)
        if old is not None:  # the same folder read again (it grew, a profile landed): a selection stays on it
            self.remove_run(old.id, keep_selection=True)
            run.id = old.id
        elif run.id in self.views:
            run.id = f"{run.id}#{next(self._ids)}"
        for graph in run.graphs:
            graph.run_id = run.id
            self.generated[normalize_path(str(graph.output_code))] = build_generated_file(run, graph)
            self.readable[normalize_path(str(graph.readable))] = (run, graph)
        self.views[run.id] = build_view(run)

    def remove_run(self, run_id: str, keep_selection: bool = False) -> Run | None:
        view = self.views.pop(run_id, None)
        if view is None:
            return None
        for graph in view.run.graphs:
            self.generated.pop(normalize_path(str(graph.output_code)), None)
            self.readable.pop(normalize_path(str(graph.readable)), None)
        if self.selected_run_id == run_id and not keep_selection:
            self.selected_run_id = None
        return view.run

    def run_at_path(self, path: Path) -> Run | None:
        target = normalize_path(str(path))
        return next((v.run for v in self.views.values() if normalize_path(str(v.run.path)) == target), None)

    def select(self, run_id: str | None) -> bool:
        if run_id is not None and run_id not in self.views:
            return False
        self.selected_run_id = run_id
        return True

    # -- queries ------------------------------------------------------------------------------------
    def runs_newest_first(self) -> list[Run]:
        return sorted((v.run for v in self.views.values()), key=lambda r: (r.time, r.id), reverse=True)

    def shadowed(self, run: Run) -> bool:
        """A trace run whose process also wrote a debug directory that is indexed."""
        return run.kind == "trace" and run.pid is not None and any(
            v.run.pid == run.pid and v.run.kind != "trace" for v in self.views.values())

    def trace_functions_in(self, file: str) -> list[TraceFunction]:
        return self.trace.functions_in(normalize_path(file))

    def current_run_id(self) -> str | None:
        """The selected run, else the newest (a trace run yields to its process's debug directory)."""
        if self.selected_run_id is not None:
            return self.selected_run_id
        runs = [run for run in self.runs_newest_first() if not self.shadowed(run)]
        return runs[0].id if runs else None

    def view_for_file(self, file: str) -> RunView | None:
        file = normalize_path(file)
        selected = self.views.get(self.selected_run_id or "")
        if selected is not None and file in selected.files:
            return selected
        for run in self.runs_newest_first():
            view = self.views[run.id]
            if file in view.files and not self.shadowed(run):
                return view
        return None

    def covered_files(self) -> set[str]:
        return set().union(*(v.files for v in self.views.values())) if self.views else set()

    def hits_at(self, file: str, line: int) -> list[LineHit]:
        view = self.view_for_file(file)
        return view.by_source_line.get((normalize_path(file), line), []) if view else []

    def kernels_of_function(self, file: str, function: str) -> list[KernelRef]:
        view = self.view_for_file(file)
        return view.by_function.get((normalize_path(file), function), []) if view else []

    def graphs_of_function(self, file: str, function: str) -> list[FunctionGraph]:
        """The answering run's graphs holding the function's nodes, oldest compile first."""
        view = self.view_for_file(file)
        return view.graphs_by_function.get((normalize_path(file), function), []) if view else []

    def functions_in(self, file: str) -> dict[str, list[KernelRef]]:
        view = self.view_for_file(file)
        if view is None:
            return {}
        target = normalize_path(file)
        return {fn: refs for (f, fn), refs in view.by_function.items() if f == target}

    def lines_in(self, file: str) -> dict[int, list[LineHit]]:
        view = self.view_for_file(file)
        if view is None:
            return {}
        target = normalize_path(file)
        return {line: hits for (f, line), hits in view.by_source_line.items() if f == target}

    def line_share(self, file: str, line: int) -> float | None:
        view = self.view_for_file(file)
        return view.line_share.get((normalize_path(file), line)) if view else None

    def line_ms(self, file: str, line: int) -> float | None:
        view = self.view_for_file(file)
        return view.line_ms.get((normalize_path(file), line)) if view else None

    def why_at(self, file: str, line: int) -> list[WhyHit]:
        view = self.view_for_file(file)
        return view.why_by_line.get((normalize_path(file), line), []) if view else []

    def why_in(self, file: str) -> dict[int, list[WhyHit]]:
        view = self.view_for_file(file)
        if view is None:
            return {}
        target = normalize_path(file)
        return {line: hits for (f, line), hits in view.why_by_line.items() if f == target}

    def generated_file(self, path: str) -> GeneratedFile | None:
        return self.generated.get(normalize_path(path))

    def readable_graph(self, path: str) -> tuple[Run, Graph] | None:
        return self.readable.get(normalize_path(path))

    def node_at_readable_line(self, path: str, line: int) -> tuple[Graph, FxNode] | None:
        """The node whose statement (or `# File:` comment block) is at `line`."""
        found = self.readable_graph(path)
        if found is None:
            return None
        graph = found[1]
        after = [n for n in graph.nodes.values() if n.readable_line is not None and n.readable_line >= line
                 and n.graph_file == READABLE_GRAPH]
        if not after:
            return None
        node = min(after, key=lambda n: n.readable_line or 0)
        lines_between = node.readable_line - line if node.readable_line else 0
        return (graph, node) if lines_between <= len(node.frames) else None

    def graph_by_id(self, run_id: str, graph_id: str) -> Graph | None:
        view = self.views.get(run_id)
        return next((g for g in view.run.graphs if g.id == graph_id), None) if view else None


def source_of(graph: Graph, names: list[str]) -> SourceLocation | None:
    for name in names:
        node = graph.nodes.get(name)
        if node is not None and node.source is not None:
            return node.source
    return None
