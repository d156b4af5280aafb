"""What a `def` became: the kernels of the FX nodes whose source lines lie in its body (every graph of every
frame of the answering run, Dynamo's resume functions included: their code is the function's own lines), and,
apart, what the calls on its lines became (the nodes whose recorded caller frames are on those lines).

A function is found by its lines, never by its name: methods of one name in one file are distinct, and a
function that never ran owns nothing. Where the run's graphs do not record their nodes' callers (a real Inductor
run whose structured trace is gone: its debug files keep each node's innermost frame only), a function whose calls
became nothing of its own says so (`unrecorded`), never an empty "via calls" total.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from typing import Any

from lsp_server.index import FunctionGraph, Index, KernelRef, LineHit
from lsp_server.model import Graph, compile_order
from lsp_server.features.compile_sites import compile_sites
from lsp_server.features.lookup import path_of
from lsp_server.features.source_lines import DefSpan, FileLines, file_lines


@dataclass
class FunctionKernels:
    span: DefSpan
    lines: dict[int, list[LineHit]] = field(default_factory=dict)  # current line -> its kernels
    refs: list[KernelRef] = field(default_factory=list)  # its lines' kernels, compile order, once each
    graphs: list[FunctionGraph] = field(default_factory=list)  # graphs holding its lines' nodes, compile order
    via_calls: list[KernelRef] = field(default_factory=list)  # kernels of the code its lines called (some
    # may be its own lines' too: fused with them)
    callee_lines: list[tuple[str, int, str]] = field(default_factory=list)  # (file, line, function) called into
    unrecorded: list[Graph] = field(default_factory=list)  # graphs its calls may have gone into, callers unrecorded
    silent_calls: list[int] = field(default_factory=list)  # its current lines with calls that became nothing own


def kernel_order(ref: KernelRef) -> tuple:
    """Graphs in compile order, kernels in the graph's order (kernel_map.json's: the order call() runs them)."""
    return compile_order(ref.graph.id), next(i for i, k in enumerate(ref.graph.kernels) if k is ref.kernel)


def unique_refs(hits: list[LineHit]) -> list[KernelRef]:
    seen: dict[tuple[int, int], KernelRef] = {}
    for hit in hits:
        seen.setdefault((id(hit.ref.graph), id(hit.ref.kernel)), hit.ref)
    return sorted(seen.values(), key=kernel_order)


def function_kernels(lines: FileLines, span: DefSpan) -> FunctionKernels:
    """The kernels, graphs and calls of `span`'s own lines (memoised on the answering run's view)."""
    key = ("function_kernels", span)
    cached = lines.memo.get(key)
    if cached is not None:
        return cached
    found = FunctionKernels(span)
    owned = sorted(old for old, new in lines.to_current.items() if span.owns(new))
    for old in owned:
        hits = lines.view.by_source_line.get((lines.file, old))
        if hits:
            found.lines[lines.to_current[old]] = hits
    found.refs = unique_refs([h for hits in found.lines.values() for h in hits])
    found.graphs = owned_graphs(lines, owned, span.name)
    via: list[LineHit] = []
    callees: dict[tuple[str, int], str] = {}
    for old in owned:
        for hit, frame in lines.view.by_caller_line.get((lines.file, old), []):
            via.append(hit)
            callees.setdefault((frame.file, frame.line), frame.function)
    found.via_calls = unique_refs(via)  # a kernel its own lines share with a callee's counts in both
    found.callee_lines = sorted((f, line, fn) for (f, line), fn in callees.items())
    unrecorded = [g for g in lines.view.run.graphs if not g.callers_recorded and g.kernels]  # (eager: none)
    if unrecorded:  # lines with calls that became nothing of their own, nor recorded callers of anything
        calling = {old for old in owned if (lines.file, old) in lines.view.by_caller_line}
        found.silent_calls = [n for n in call_lines(lines) if span.owns(n) and n not in found.lines
                              and lines.to_recorded.get(n) not in calling]
    if found.silent_calls:
        graphs = {id(g.graph) for g in found.graphs}
        if not graphs and compile_sites(lines.text, span.name).wraps:  # handed to torch.compile: all are its
            graphs = {id(g) for g in unrecorded}
        found.unrecorded = [g for g in unrecorded if id(g) in graphs]
    lines.memo[key] = found
    return found


def call_lines(lines: FileLines) -> list[int]:
    """The document's lines holding a call (`ast`; none while the text does not parse), once per text version."""
    if "call_lines" not in lines.memo:
        try:
            tree = ast.parse("".join(t if t.endswith("\n") else t + "\n" for t in lines.text))
            lines.memo["call_lines"] = sorted({n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)})
        except (SyntaxError, ValueError):
            lines.memo["call_lines"] = []
    return lines.memo["call_lines"]


def owned_graphs(lines: FileLines, owned: list[int], name: str) -> list[FunctionGraph]:
    """Each graph holding nodes of the recorded lines `owned`, split as index.function_graphs splits them."""
    entries: dict[int, FunctionGraph] = {}
    for old in owned:
        for graph, node in lines.view.nodes_by_line.get((lines.file, old), []):
            entry = entries.get(id(graph))
            if entry is None:
                entry = entries[id(graph)] = FunctionGraph(graph, [], [], graph.eager_reason, name)
            kind = node_kind(graph, node)
            target = entry.native if kind == "native" else entry.aten if kind == "aten" else None
            if target is not None and node not in target:
                target.append(node)
    return sorted(entries.values(), key=lambda e: compile_order(e.graph.id))


def node_kind(graph: Graph, node: str) -> str | None:
    """`aten` for a node run as an ATen call (an extern kernel, notes.txt), `native` for generated code."""
    if any(node in k.nodes for k in graph.kernels if k.kind == "extern") or graph.notes.extern_for(node):
        return "aten"
    if any(node in k.nodes for k in graph.kernels):
        return "native"
    return None


def kernels_at(server: Any, index: Index, uri: str, line0: int) -> list[tuple[KernelRef, int]]:
    """Kernels for a position: all of a function's on its `def`, else those computing the source line;
    in an output_code.py, the kernel around the line. Paired with the generated line (1-based)."""
    path = path_of(uri)
    generated = index.generated_file(path)
    if generated is not None:
        kernel = generated.kernel_at(line0 + 1)
        if kernel is None:
            return []
        return [(KernelRef(generated.run, generated.graph, kernel), line0 + 1)]
    lines = file_lines(server, index, uri)
    if lines is None:
        return []
    span = lines.span_at(line0 + 1)
    if span is not None:
        refs = function_kernels(lines, span).refs
        if refs:
            return [(ref, ref.kernel.start_line) for ref in refs]
    return [(hit.ref, hit.generated_lines[0] if hit.generated_lines else hit.ref.kernel.start_line)
            for hit in lines.hits(line0 + 1)]
