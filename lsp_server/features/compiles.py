"""`kernelLens.listCompiles`: every compile the index knows — Dynamo's from the structured traces (frame, compile
id, the call that triggered it, ops, its guards with the ones later recompiles failed marked, time, why it
recompiled in plain words and the guard it quotes, torch.compiler.config's set values) and our debug directory's
graphs (the compiler.config settings not at their default) — each with the `torch.compile` line that wrapped its
function, for the extension's compiles picker. `kernelLens.listGraphBreaks`: the traces' graph breaks, one per
place and reason, with how many compiles, frames and ranks hit it."""
from __future__ import annotations

from typing import Any

from lsp_server.features.commands import first_argument
from lsp_server.features.compile_sites import compile_sites
from lsp_server.features.failsafe import failsafe
from lsp_server.features.lookup import def_line_above, document_lines, path_of, uri_of
from lsp_server.index import FunctionGraph, Index
from lsp_server.json_answer import JsonAnswer
from lsp_server.model import CompileFact

LIST_COMPILES_COMMAND = "kernelLens.listCompiles"
LIST_GRAPH_BREAKS_COMMAND = "kernelLens.listGraphBreaks"


def compile_call(server: Any, file: str, function: str) -> dict[str, Any] | None:
    """The first `torch.compile(function...)` / `@torch.compile` in the function's file (0-based line)."""
    uri = uri_of(file)
    wraps = compile_sites(document_lines(server, uri), function).wraps
    return {"uri": uri, "line": wraps[0] - 1} if wraps else None


def compile_json(server: Any, c: CompileFact) -> dict[str, Any]:
    call = {"uri": uri_of(c.call_file), "line": c.call_line - 1} if c.call_file and c.call_line else None
    guards = [{"kind": g.guard.kind, "code": g.guard.code,
               "line": g.guard.line - 1 if g.guard.line is not None and g.guard.in_file(c.file) else None,
               "failed_for": list(g.failed_for)} for g in c.guard_list]
    causes = [{"cache_entry": r.cache_entry, "words": r.words, "guard": r.guard} for r in c.causes]
    return {"function": c.function, "compile_id": c.compile_id, "rank": c.rank, "uri": uri_of(c.file),
            "def_line": c.def_line - 1, "call_site": call, "ops": c.ops, "guards": c.guards,
            "compile_time_s": c.compile_time_s, "status": c.status, "graph_breaks": c.graph_breaks,
            "recompile_reasons": list(c.recompile_reasons), "guard_list": guards, "recompile_causes": causes,
            "origin": "TORCH_TRACE",
            "config": {f"torch.compiler.config.{k}": v for k, v in c.config},
            "compile_call": compile_call(server, c.file, c.function)}


# A debug-directory graph's status in the words of Dynamo's compiles (the picker shows both side by side).
GRAPH_STATUS = {"ok": "compiled", "compile_error": "failed", "eager": "ran eagerly",
                "accuracy_error": "compiled, differs from eager"}


def graph_json(server: Any, entry: FunctionGraph, file: str, frame_function: str) -> dict[str, Any]:
    """One of our debug directory's graphs as a compile (Dynamo's ids and guards are not in the folder)."""
    graph, ops = entry.graph, len(entry.native) + len(entry.aten)
    first = min((frame.line for node in graph.nodes.values() for frame in node.frames
                 if (frame.file, frame.function) == (file, frame_function)), default=1)
    # Dynamo's continuation after a graph break is the user's function from that line on.
    function, resumed_at = entry.function, entry.resumed_after
    def_line = def_line_above(server, uri_of(file), function, first) or first
    label = function if resumed_at is None else f"{function} (after the graph break at line {resumed_at})"
    return {"function": label, "compile_id": graph.id, "rank": None, "uri": uri_of(file), "def_line": def_line - 1,
            "call_site": None, "ops": ops, "guards": None, "compile_time_s": None,
            "status": GRAPH_STATUS.get(graph.status, graph.status),
            "graph_breaks": 0, "recompile_reasons": [], "guard_list": [], "recompile_causes": [],
            "origin": f"debug directory, run {graph.run_id}",
            "config": {f"compiler.config.{k}": v for k, v in graph.config.items()},
            "compile_call": compile_call(server, file, function)}


def list_compiles(server: Any, index: Index, uri: str | None) -> list[dict[str, Any]]:
    """The compiles of `uri`'s file (all files without one), in file, function and compile-id order; then the
    graphs of the run answering for the file (the current run without one)."""
    wanted = path_of(uri) if uri else None
    found = [c for c in index.trace.compiles if wanted is None or c.file == wanted]
    found.sort(key=lambda c: (c.file, c.def_line, c.rank if c.rank is not None else -1,
                              tuple(int(p) if p.isdigit() else 0 for p in c.compile_id.split("/"))))
    view = index.view_for_file(wanted) if wanted else index.views.get(index.current_run_id() or "")
    graphs = [] if view is None else [
        graph_json(server, entry, file, function)
        for (file, function), entries in sorted(view.graphs_by_function.items())
        if wanted is None or file == wanted for entry in entries if view.run.kind != "trace"]
    return [compile_json(server, c) for c in found] + graphs


def list_graph_breaks(index: Index, uri: str | None) -> list[dict[str, Any]]:
    """Each graph break once per (file, line, reason), over frames, recompiles and ranks, most compiles first."""
    wanted = path_of(uri) if uri else None
    merged: dict[tuple[str, int, str], dict[str, Any]] = {}
    for c in index.trace.compiles:
        for file, line, reason in c.breaks:
            if wanted is not None and file != wanted:
                continue
            entry = merged.setdefault((file, line, reason), {"reason": reason, "uri": uri_of(file), "line": line - 1,
                                                             "compiles": 0, "frames": set(), "ranks": set(),
                                                             "functions": set()})
            entry["compiles"] += 1
            entry["frames"].add((c.rank, c.compile_id.rsplit("/", 1)[0]))
            entry["ranks"].add(c.rank)
            entry["functions"].add(c.function)
    out = [{**e, "frames": len(e["frames"]), "ranks": sorted(r for r in e["ranks"] if r is not None),
            "functions": sorted(e["functions"])} for e in merged.values()]
    return sorted(out, key=lambda e: (-e["compiles"], e["uri"], e["line"]))


def register(server: Any) -> None:
    @server.command(LIST_COMPILES_COMMAND)
    @failsafe(server, LIST_COMPILES_COMMAND)
    def list_compiles_command(*args: Any) -> list[dict[str, Any]]:
        uri = first_argument(args).get("uri")
        return list_compiles(server, server.index, uri if isinstance(uri, str) else None)

    @server.command(LIST_GRAPH_BREAKS_COMMAND)
    @failsafe(server, LIST_GRAPH_BREAKS_COMMAND)
    def list_graph_breaks_command(*args: Any) -> JsonAnswer:
        uri = first_argument(args).get("uri")
        return JsonAnswer({"graph_breaks": list_graph_breaks(server.index, uri if isinstance(uri, str) else None)})
