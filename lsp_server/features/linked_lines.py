"""Compiler-Explorer-style linking of a user file and one graph's output_code.py: each source line and the
generated lines it became share a colour band (`kernelLens.linkedLines`), the prelude before the first kernel
folds away (folding ranges of output_code.py), and each line's cost (`kernelLens.lineCosts`)."""
from __future__ import annotations

from collections import Counter
from typing import Any

from lsprotocol import types

from lsp_server.features.commands import first_argument
from lsp_server.features.failsafe import failsafe
from lsp_server.features.lookup import path_of, uri_of
from lsp_server.features.source_lines import file_lines
from lsp_server.index import Index
from lsp_server.json_answer import JsonAnswer
from lsp_server.model import Graph, normalize_path

LINKED_LINES_COMMAND = "kernelLens.linkedLines"
LINE_COSTS_COMMAND = "kernelLens.lineCosts"


def graph_links(graph: Graph, file: str) -> dict[int, set[int]]:
    """Source line of `file` -> the generated lines (1-based both) computing its nodes in `graph`."""
    links: dict[int, set[int]] = {}
    for kernel in graph.kernels:
        lines = kernel.lines or [None]
        for kernel_line in lines:
            names = kernel_line.nodes if kernel_line is not None else kernel.nodes
            for name in names:
                node = graph.nodes.get(name)
                if node is None or node.source is None or node.source.file != file:
                    continue
                generated = [kernel_line.line] if kernel_line is not None else kernel.launch_lines or [kernel.start_line]
                links.setdefault(node.source.line, set()).update(generated)
    return links


def prelude_lines(graph: Graph) -> tuple[int, int] | None:
    """1-based first and last line before the first generated kernel (the shared C++ prelude), if any."""
    starts = [k.start_line for k in graph.kernels if k.kind != "extern"]
    first = min(starts) if starts else None
    return (1, first - 1) if first is not None and first > 3 else None


def main_source_file(graph: Graph) -> str | None:
    counts = Counter(n.source.file for n in graph.nodes.values() if n.source is not None)
    return counts.most_common(1)[0][0] if counts else None


def linked_lines_json(index: Index, uri: str, graph_id: str | None = None) -> dict[str, Any] | None:
    path = path_of(uri)
    generated = index.generated_file(path)
    view = index.views.get(generated.run.id) if generated is not None else index.view_for_file(path)
    if view is None:
        return None
    key = ("linked_lines", path, graph_id)
    if key not in view.memo:  # the run's graphs never change under a view: one answer per file and graph
        if generated is not None:
            file = main_source_file(generated.graph)
            view.memo[key] = links_json(generated.graph, file, [generated.graph]) if file is not None else None
        else:
            view.memo[key] = source_links(view.run.graphs, normalize_path(path), graph_id)
    return view.memo[key]


def source_links(graphs: list[Graph], file: str, graph_id: str | None) -> dict[str, Any] | None:
    """The answer for a user file: the named graph, else the one linking most of its lines."""
    candidates = [g for g in graphs if g.kernels and any(
        n.source is not None and n.source.file == file for n in g.nodes.values())]
    if not candidates:
        return None
    chosen = [g for g in candidates if g.id == graph_id]
    graph = chosen[0] if chosen else max(candidates, key=lambda g: len(graph_links(g, file)))
    return links_json(graph, file, candidates)


def links_json(graph: Graph, file: str, candidates: list[Graph]) -> JsonAnswer:
    links = graph_links(graph, file)
    prelude = prelude_lines(graph)
    return JsonAnswer({"run_id": graph.run_id, "graph_id": graph.id, "source_uri": uri_of(file),
            "generated_uri": uri_of(graph.output_code),
            "links": [{"source_line": line - 1, "generated_lines": [n - 1 for n in sorted(lines)], "band": band}
                      for band, (line, lines) in enumerate(sorted(links.items()))],
            "prelude": {"start": prelude[0] - 1, "end": prelude[1] - 1} if prelude else None,
            "graphs": [{"graph_id": g.id, "uri": uri_of(g.output_code)} for g in candidates]})


def line_costs_json(index: Index, uri: str) -> dict[str, Any] | None:
    """Each source line's cost in the answering run: its share of the profiled time and ms per iteration, and
    the kernels it came from (each kernel's time is split evenly over the source lines it computes)."""
    path = path_of(uri)
    view = index.view_for_file(path)
    if view is None:
        return None
    file = normalize_path(path)
    lines = []
    for (f, line), hits in view.by_source_line.items():
        percent, ms = view.line_share.get((f, line)), view.line_ms.get((f, line))
        if f != file or (percent is None and ms is None):
            continue
        kernels = []
        for hit in hits:
            kernel, graph = hit.ref.kernel, hit.ref.graph
            shared = len({(n.source.file, n.source.line) for name in kernel.nodes
                          if (n := graph.nodes.get(name)) is not None and n.source is not None}) or 1
            kernels.append({"name": kernel.name, "graph_id": graph.id, "lines_sharing": shared,
                            "percent": kernel.percent / shared if kernel.percent is not None else None,
                            "ms": kernel.time_ms / shared if kernel.time_ms is not None else None})
        lines.append({"line": line - 1, "percent": percent, "ms": ms, "kernels": kernels})
    lines.sort(key=lambda entry: -(entry["percent"] or 0.0))
    return {"run_id": view.run.id, "uri": uri, "lines": lines,
            "measures": "percent: share of one profiled iteration (profile.json's profiled_ms; Inductor's -p run: "
                        "of its wall time, or of its profiled iteration where that took longer); ms: milliseconds "
                        "per iteration under the profiler; a kernel's time is split evenly over the source lines "
                        "it computes"}


def folding_ranges(index: Index, uri: str) -> list[types.FoldingRange] | None:
    """In an output_code.py: the prelude (folded by the kernel view) and each kernel."""
    generated = index.generated_file(path_of(uri))
    if generated is None:
        return None
    graph = generated.graph
    ranges = []
    prelude = prelude_lines(graph)
    if prelude is not None:
        ranges.append(types.FoldingRange(prelude[0] - 1, prelude[1] - 1, kind=types.FoldingRangeKind.Imports))
    ranges += [types.FoldingRange(k.start_line - 1, k.end_line - 1, kind=types.FoldingRangeKind.Region)
               for k in graph.kernels if k.end_line > k.start_line]
    return ranges


def follow_edits(server: Any, index: Index, uri: str, answer: dict[str, Any] | None) -> dict[str, Any] | None:
    """The answer's source lines where they are in the user file's text now (a line changed since the compile
    has no band and no cost): `kernelLens.linkedLines` / `lineCosts` for a user file."""
    if answer is None or index.generated_file(path_of(uri)) is not None:
        return answer
    lines = file_lines(server, index, uri)
    if lines is None or lines.unchanged:
        return answer
    moved = JsonAnswer(answer)
    if "links" in answer:
        moved["links"] = [dict(link, source_line=lines.to_current[link["source_line"] + 1] - 1)
                          for link in answer["links"] if link["source_line"] + 1 in lines.to_current]
    if "lines" in answer:
        moved["lines"] = [dict(entry, line=lines.to_current[entry["line"] + 1] - 1)
                          for entry in answer["lines"] if entry["line"] + 1 in lines.to_current]
    return moved


def register(server: Any) -> None:
    @server.command(LINKED_LINES_COMMAND)
    @failsafe(server, LINKED_LINES_COMMAND)
    def linked_lines(*args: Any) -> dict[str, Any] | None:
        where = first_argument(args)
        graph_id = where.get("graph_id")
        if not isinstance(where.get("uri"), str):
            return None
        answer = linked_lines_json(server.index, where["uri"], graph_id if isinstance(graph_id, str) else None)
        return follow_edits(server, server.index, where["uri"], answer)

    @server.command(LINE_COSTS_COMMAND)
    @failsafe(server, LINE_COSTS_COMMAND)
    def line_costs(*args: Any) -> dict[str, Any] | None:
        uri = first_argument(args).get("uri")
        return follow_edits(server, server.index, uri, line_costs_json(server.index, uri)) if isinstance(uri, str) \
            else None

    @server.feature(types.TEXT_DOCUMENT_FOLDING_RANGE)
    @failsafe(server, "foldingRange")
    def folding_range(params: types.FoldingRangeParams) -> list[types.FoldingRange] | None:
        return folding_ranges(server.index, params.text_document.uri)
