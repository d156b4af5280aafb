"""`python -m lsp_server index DIR`: what the index holds for DIR, as text or JSON."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lsp_server.index import Index
from lsp_server.loading.run_loader import debug_dirs_under, find_run_dirs, load_run
from lsp_server.model import Graph, Run


def build_index(folder: Path) -> Index:
    """Every run below `folder`, at any depth (a script run from a sub-folder writes its runs there)."""
    index = Index()
    for debug_dir in debug_dirs_under(folder.absolute()):
        for run_dir in find_run_dirs(debug_dir):
            run = load_run(run_dir)
            if run is not None:
                index.put_run(run)
    return index


def graph_json(graph: Graph) -> dict[str, Any]:
    def source(name: str) -> dict[str, Any] | None:
        node = graph.nodes.get(name)
        if node is None or node.source is None:
            return None
        return {"file": node.source.file, "line": node.source.line, "function": node.source.function,
                "code": node.source.code}
    return {"id": graph.id, "path": str(graph.path), "direction": graph.direction, "status": graph.status,
            "problems": graph.problems,
            "nodes": [{"name": n.name, "target": n.target, "readable_line": n.readable_line,
                       "source": source(n.name)} for n in graph.nodes.values()],
            "compile_error": None if graph.compile_error is None else {
                "command": graph.compile_error.command,
                "diagnostics": [{"severity": d.severity, "message": d.message, "output_code_line": d.output_code_line,
                                 "kernel": d.kernel, "nodes": d.nodes,
                                 "source": None if d.source is None else {"file": d.source.file, "line": d.source.line,
                                                                          "code": d.source.code}}
                                for d in graph.compile_error.diagnostics]},
            "notes": {"eager": graph.eager_reason,
                      "externs": [{"node": e.node, "target": e.target, "reason": e.reason} for e in graph.notes.externs],
                      "other": graph.notes.other},
            "kernels": [{"name": k.name, "kind": k.kind, "language": k.language,
                         "output_code_lines": [k.start_line, k.end_line], "nodes": k.nodes,
                         "lines": [{"output_code_line": kl.line, "nodes": kl.nodes} for kl in k.lines],
                         "time_ms": k.time_ms} for k in graph.kernels]}


def run_json(run: Run) -> dict[str, Any]:
    ranked = {"rank": run.rank, "world_size": run.world_size} if run.rank is not None else {}
    return {"id": run.id, "path": str(run.path), "kind": run.kind, "time": run.time.isoformat(), **ranked,
            "problems": run.run_problems, "graphs": [graph_json(g) for g in run.graphs]}


def print_index(folder: str, as_json: bool) -> int:
    path = Path(folder)
    if not path.is_dir():
        print(f"{folder}: not a directory")
        return 2
    runs = build_index(path).runs_newest_first()
    if as_json:
        print(json.dumps({"runs": [run_json(r) for r in runs]}, indent=1))
        return 0
    if not runs:
        print(f"no runs under {path}")
    for run in runs:
        rank = f"  {run.rank_label}" if run.rank_label else ""
        print(f"{run.id}  [{run.kind}]{rank}  {run.time.isoformat()}  {len(run.graphs)} graphs, "
              f"{run.kernel_count} kernels")
        for problem in run.run_problems:
            print(f"  ! {problem}")
        for graph in run.graphs:
            kind = f" ({graph.direction})" if graph.direction else ""  # forward | backward | inference
            print(f"  {graph.id}{kind}  status={graph.status}  {len(graph.nodes)} nodes")
            for problem in graph.problems:
                print(f"    ! {problem}")
            for d in graph.compile_error.diagnostics if graph.compile_error else []:
                where = f" -> {d.source.file}:{d.source.line}  {d.source.code}" if d.source else ""
                print(f"    C++ {d.severity}: {d.message} ({d.kernel or 'no kernel'} {', '.join(d.nodes)}){where}")
            if graph.eager_reason is not None:
                print(f"    runs eagerly: {graph.eager_reason}")
            for note in graph.notes.externs:
                print(f"    ATen call {note.node} -> {note.target}" + (f": {note.reason}" if note.reason else ""))
            for kernel in graph.kernels:
                print(f"    {kernel.name} ({kernel.kind}) output_code.py:{kernel.start_line}-{kernel.end_line}")
                for name in kernel.nodes:
                    node = graph.nodes.get(name)
                    where = f"{node.source.file}:{node.source.line}  {node.source.code}" if node and node.source else "-"
                    print(f"      {name:<16} {where}")
    return 0
