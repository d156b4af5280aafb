"""`kernelLens.diffRuns` in process: two indexed runs' lens graphs as the format's `DiffGraph`s, diffed by
`lens_format.run_diff` (the document `kernel-lens diff --json` prints, outputs compared by their bytes)."""
from __future__ import annotations

from typing import Any

from lens_format.run_diff import DiffGraph, diff_runs
from lens_format.tensors import outputs_by_bytes
from lsp_server.model import Graph, Run, compile_order


def diff_graph_of(graph: Graph) -> DiffGraph:
    return DiffGraph.build(graph.id, str(graph.path), ((n.name, n.target, n.source) for n in graph.nodes.values()),
                           ((k.name, k.kind, k.nodes, k.start_line, k.end_line) for k in graph.kernels),
                           graph.output_code_lines,
                           {k.name: k.time_ms for k in graph.kernels if k.time_ms is not None},
                           graph.profile.compiled_ms if graph.profile else None)


def lens_graphs(run: Run) -> list[DiffGraph]:
    """The run's graphs with generated kernels, in compile order."""
    return [diff_graph_of(g) for g in sorted(run.graphs, key=lambda g: compile_order(g.id)) if g.kernels]


def diff_indexed_runs(run_a: Run, run_b: Run) -> dict[str, Any]:
    return diff_runs(str(run_a.path), lens_graphs(run_a), str(run_b.path), lens_graphs(run_b), outputs_by_bytes)
