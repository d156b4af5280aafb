"""`workspace/executeCommand` handlers for the extension's views (signatures fixed with the extension)."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from lsprotocol import types

from lsp_server.features.failsafe import failsafe
from lsp_server.features.function_kernels import kernels_at
from lsp_server.features.lookup import path_of, uri_of
from lsp_server.features.ranks import other_ranks, run_divergence
from lsp_server.index import Index, RunView, source_of
from lsp_server.jobs import JobError, run_job
from lsp_server.model import Run
from lsp_server.reports.run_diff import diff_indexed_runs

PROFILE_INDUCTOR_COMMAND = "kernelLens.profileInductor"


def run_summary(index: Index, run: Run) -> dict[str, Any]:
    summary = {"id": run.id, "path": str(run.path), "kind": run.kind, "time": run.time.isoformat(),
               "graphs": len(run.graphs), "kernels": run.kernel_count, "selected": run.id == index.current_run_id()}
    if run.rank is not None:
        summary.update(rank=run.rank, world_size=run.world_size, **rank_of(run))
        differ = [d for other in other_ranks(index, run) if (d := run_divergence(index.views[run.id], other))]
        if differ:
            summary["diverges"] = "; ".join(differ)
    return summary


def rank_of(run: Run) -> dict[str, str]:
    """{"rank_label": "rank 0 of 2"} for a run of a distributed job, else {} (answers that name a run)."""
    return {"rank_label": run.rank_label} if run.rank_label else {}


def kernels_at_json(server: Any, index: Index, uri: str, line0: int) -> list[dict[str, Any]]:
    return [{"name": ref.kernel.name, "kind": ref.kernel.kind, "graph_id": ref.graph.id, "run_id": ref.run.id,
             "uri": uri_of(ref.graph.output_code), "start_line": ref.kernel.start_line - 1,
             "end_line": ref.kernel.end_line - 1, "line": line - 1, "time_ms": ref.kernel.time_ms, **rank_of(ref.run)}
            for ref, line in kernels_at(server, index, uri, line0)]


def profile_json(index: Index, run_id: str | None) -> dict[str, Any] | None:
    view = index.views.get(run_id or index.current_run_id() or "")
    if view is None:
        return None
    graphs = []
    for graph in view.run.graphs:
        profile = graph.profile
        if profile is None:
            continue
        kernels_by_name: dict[str, list] = {}
        for k in graph.kernels:  # several `extern_kernels.mm` calls: rows take them in call order
            kernels_by_name.setdefault(k.name, []).append(k)
        kernels = []
        for timed in profile.kernels:
            same = kernels_by_name.get(timed.name) or [None]
            kernel = same.pop(0) if len(same) > 1 else same[0]
            source = source_of(graph, kernel.nodes) if kernel else None
            kernels.append({"name": timed.name, "kind": timed.kind or (kernel.kind if kernel else ""),
                            "calls": timed.calls, "total_ms": timed.total_ms, "percent": timed.percent,
                            "uri": uri_of(graph.output_code), "line": (kernel.start_line - 1) if kernel else 0,
                            "source": {"uri": uri_of(source.file), "line": source.line - 1} if source else None})
        graphs.append({"graph_id": graph.id, "eager_ms": profile.eager_ms, "compiled_ms": profile.compiled_ms,
                       "speedup": profile.speedup, "profiled_ms": profile.profiled_ms,
                       "categories": [{"kind": c.kind, "total_ms": c.total_ms, "percent": c.percent}
                                      for c in profile.categories],
                       "kernels": kernels, "busy_percent": profile.busy_percent, "device": profile.device or "cpu"})
    return ({"run_id": view.run.id, **rank_of(view.run), "graphs": graphs, "lines": costly_lines(view)}
            if graphs else None)


def costly_lines(view: RunView, limit: int = 50) -> list[dict[str, Any]]:
    """The run's source lines by cost (share of the profiled iteration, ms), each with the kernels it came from;
    lines of equal cost (one kernel's lines) in file and line order, so two answers of one run agree."""
    out = []
    for (file, line), percent in sorted(view.line_share.items(), key=lambda item: (-item[1], item[0]))[:limit]:
        hits = view.by_source_line.get((file, line), [])
        code = next((n.source.code for h in hits for name in h.nodes
                     if (n := h.ref.graph.nodes.get(name)) is not None and n.source is not None
                     and n.source.line == line and n.source.code), "")
        out.append({"uri": uri_of(file), "file": Path(file).name, "line": line - 1, "code": code.strip(),
                    "percent": percent, "ms": view.line_ms.get((file, line)),
                    "kernels": sorted({h.ref.kernel.name for h in hits})})
    return out


def kernel_locations(index: Index, run_id: str, graph_id: str | None, names: list[str]) -> list[dict[str, Any]]:
    """Where the named kernels of one run's graph are, for the extension's side-by-side diff view."""
    view = index.views.get(run_id)
    graph = next((g for g in view.run.graphs if g.id == graph_id), None) if view and graph_id else None
    if graph is None:
        return []
    return [{"name": k.name, "uri": uri_of(graph.output_code), "start_line": k.start_line - 1,
             "end_line": k.end_line - 1} for k in graph.kernels if k.name in names]


def inductor_profile_target(index: Index, request: dict[str, Any]) -> Path | str:
    """What `profileInductor` profiles: the output_code.py named, else the run of the file, the run named or
    the current run; a message when that is not a real Inductor run."""
    uri, run_id = request.get("uri"), request.get("run_id")
    run = None
    if isinstance(uri, str):
        generated = index.generated_file(path_of(uri))
        if generated is not None and generated.run.kind != "lens":
            return generated.graph.output_code
        view = index.view_for_file(path_of(uri))
        run = view.run if view is not None else None
    else:
        view = index.views.get(run_id if isinstance(run_id, str) else index.current_run_id() or "")
        run = view.run if view is not None else None
    if run is None:
        return "no indexed run to profile (open an output_code.py or a file a run compiled)"
    if run.kind == "lens":
        return f"run {run.id} is ours: profile it with `kernel-lens profile SCRIPT` (profile.json)"
    if not any(g.output_code.is_file() for g in run.graphs):
        return f"run {run.id} has no output_code.py to profile"
    return run.path  # a trace run's graph folders (rebuilt from its log) profile as well


def first_argument(args: tuple[Any, ...]) -> dict[str, Any]:
    return args[0] if args and isinstance(args[0], dict) else {}


def refresh_editor(server: Any) -> None:
    """After a selection change: republish diagnostics, ask the client to refresh lenses and hints."""
    server.after_index_change([])
    capabilities = server.client_capabilities.workspace
    if capabilities and capabilities.code_lens and capabilities.code_lens.refresh_support:
        server.workspace_code_lens_refresh(None)
    if capabilities and capabilities.inlay_hint and capabilities.inlay_hint.refresh_support:
        server.workspace_inlay_hint_refresh(None)


def register(server: Any) -> None:
    from lsp_server.features import gpu_kernels  # issue 47: tritonChain, benchmarkKernel

    gpu_kernels.register(server)

    @server.command("kernelLens.reindex")
    @failsafe(server, "kernelLens.reindex")
    def reindex(*args: Any) -> dict[str, int]:
        return {"runs": server.reindex_all()}

    @server.command("kernelLens.listRuns")
    @failsafe(server, "kernelLens.listRuns")
    def list_runs(*args: Any) -> list[dict[str, Any]]:
        return [run_summary(server.index, run) for run in server.index.runs_newest_first()]

    @server.command("kernelLens.selectRun")
    @failsafe(server, "kernelLens.selectRun")
    def select_run(*args: Any) -> dict[str, Any]:
        run_id = args[0] if args else None
        if isinstance(run_id, dict):
            run_id = run_id.get("run_id")
        if not server.index.select(run_id if isinstance(run_id, str) else None):
            return {"selected": None, "error": f"unknown run {run_id!r}"}
        refresh_editor(server)
        return {"selected": run_id}

    @server.command("kernelLens.kernelsAt")
    @failsafe(server, "kernelLens.kernelsAt")
    def kernels_at_command(*args: Any) -> list[dict[str, Any]]:
        where = first_argument(args)
        if not isinstance(where.get("uri"), str) or not isinstance(where.get("line"), int):
            return []
        return kernels_at_json(server, server.index, where["uri"], where["line"])

    @server.command("kernelLens.getProfile")
    @failsafe(server, "kernelLens.getProfile")
    def get_profile(*args: Any) -> dict[str, Any] | None:
        run_id = first_argument(args).get("run_id")
        return profile_json(server.index, run_id if isinstance(run_id, str) else None)

    @server.command("kernelLens.diffRuns")
    @failsafe(server, "kernelLens.diffRuns")
    async def diff_runs_command(*args: Any) -> dict[str, Any]:
        """{"a": run_id, "b": run_id} -> `kernel-lens diff --json`'s document, each kernel entry with `a_locations` and
        `b_locations` (uri + 0-based line range of the kernels in each run's output_code.py)."""
        request = first_argument(args)
        views = [server.index.views.get(request.get(side) or "") for side in ("a", "b")]
        if any(v is None for v in views):
            return {"error": f"unknown run(s): {request.get('a')!r}, {request.get('b')!r}"}
        run_a, run_b = views[0].run, views[1].run
        report = diff_indexed_runs(run_a, run_b)  # from the index, in process (lens_format.run_diff)
        for graph in report.get("graphs", []):
            for kernel in graph.get("kernels", []):
                kernel["a_locations"] = kernel_locations(server.index, run_a.id, graph.get("a"), kernel.get("a") or [])
                kernel["b_locations"] = kernel_locations(server.index, run_b.id, graph.get("b"), kernel.get("b") or [])
        report["a_run"], report["b_run"] = run_a.id, run_b.id
        return report

    @server.command("kernelLens.runJob")
    @failsafe(server, "kernelLens.runJob")
    async def run_job_command(*args: Any) -> dict[str, Any]:
        request = first_argument(args)
        kind, uri = request.get("kind"), request.get("uri")
        if not isinstance(kind, str) or not isinstance(uri, str):
            return {"exit_code": 2, "output_tail": "runJob expects {\"kind\": str, \"uri\": str}"}
        return await job_with_progress(server, kind, Path(path_of(uri)))

    @server.command(PROFILE_INDUCTOR_COMMAND)
    @failsafe(server, PROFILE_INDUCTOR_COMMAND)
    async def profile_inductor_command(*args: Any) -> dict[str, Any]:
        """{} (the current run), {"uri": an output_code.py or a user file} or {"run_id": id}: `kernel-lens
        profile-inductor` on those real Inductor graphs, so their category breakdown shows."""
        target = inductor_profile_target(server.index, first_argument(args))
        if isinstance(target, str):
            return {"exit_code": 2, "output_tail": target}
        return await job_with_progress(server, "profile-inductor", target)


async def job_with_progress(server: Any, kind: str, file: Path) -> dict[str, Any]:
    """Run a compiler job with work-done progress and its output in the log; reindex after it."""
    token = str(uuid.uuid4())
    window = server.client_capabilities.window
    progress = bool(window and window.work_done_progress)
    if progress:
        await server.work_done_progress.create_async(token)
        server.work_done_progress.begin(token, types.WorkDoneProgressBegin(
            f"Kernel Lens: {kind}", message=file.name, cancellable=False))

    def on_line(line: str) -> None:
        server.log(line, types.MessageType.Info)
        if progress:
            server.work_done_progress.report(token, types.WorkDoneProgressReport(message=line[:80]))

    try:
        result = await run_job(kind, file, on_line)
    except JobError as exc:
        return {"exit_code": 2, "output_tail": str(exc)}
    finally:
        if progress:
            server.work_done_progress.end(token, types.WorkDoneProgressEnd(message="done"))
    server.reindex_all()
    return {"exit_code": result.exit_code, "output_tail": result.output_tail}
