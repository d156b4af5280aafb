"""The ranks of one distributed job side by side: each rank of a DDP/FSDP job writes a run folder of its own, with
its rank in `lens/run.json`; the editor answers from one rank's run and says what the other ranks did differently.

One job's runs (`rank_jobs`): runs with a rank, the same world size, distinct ranks, whose folders' times (each
process's first compile) lie within `JOB_WINDOW` of the job's first run. The ranks of one job start together (they
wait for each other in `init_process_group`), so a minute holds them all; a second launch of the job makes runs of
ranks the job already has, so it starts a job of its own, as does a launch later than the window.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import timedelta

from lsp_server.features.describe import count_label as count
from lsp_server.index import Index, RunView, function_label
from lsp_server.model import Run, normalize_path

JOB_WINDOW = timedelta(seconds=60)
KernelKey = tuple[str, str]  # (name, kind): the same kernel on two ranks has the same name


def rank_jobs(index: Index) -> list[list[Run]]:
    """The indexed distributed jobs with more than one of their ranks indexed, each its runs by rank."""
    jobs: list[list[Run]] = []
    ranked = sorted((v.run for v in index.views.values() if v.run.rank is not None and v.run.world_size),
                    key=lambda r: (r.time, r.id))
    for run in ranked:
        job = next((j for j in reversed(jobs) if j[0].world_size == run.world_size
                    and run.time - j[0].time <= JOB_WINDOW and all(r.rank != run.rank for r in j)), None)
        if job is None:
            jobs.append([run])
        else:
            job.append(run)
    return [sorted(job, key=lambda r: r.rank or 0) for job in jobs if len(job) > 1]


def other_ranks(index: Index, run: Run) -> list[RunView]:
    """The views of the other ranks of `run`'s job, by rank (none outside a job)."""
    job = next((j for j in rank_jobs(index) if any(r is run for r in j)), [])
    return [index.views[r.id] for r in job if r is not run and r.id in index.views]


def line_kernels(view: RunView, file: str, line: int) -> Counter[KernelKey]:
    return Counter((h.ref.kernel.name, h.ref.kernel.kind) for h in view.by_source_line.get((file, line), []))


def line_graphs(view: RunView, file: str, line: int) -> int:
    """How many graphs hold the line's nodes (a recompile compiles them again)."""
    return len({id(graph) for graph, _ in view.nodes_by_line.get((file, line), [])})


def rank_line_text(view: RunView, other: RunView, file: str, line: int) -> str:
    """What `other`'s rank made of a source line, against `view`'s: "rank 1: same 2 kernels", "rank 1: 4 kernels
    in 2 graphs (rank 0: 2 in 1; recompiled)", "rank 1: 2 kernels, `a` instead of `b`"."""
    mine, theirs = line_kernels(view, file, line), line_kernels(other, file, line)
    me, them = view.run.rank, other.run.rank
    n = sum(theirs.values())
    if mine == theirs:
        return f"rank {them}: same {count(n, 'kernel')}"
    graphs_mine, graphs_theirs = line_graphs(view, file, line), line_graphs(other, file, line)
    if graphs_mine != graphs_theirs:
        who = f"rank {them}" if graphs_theirs > graphs_mine else f"rank {me}"
        return (f"rank {them}: {count(n, 'kernel')} in {count(graphs_theirs, 'graph')} (rank {me}: "
                f"{sum(mine.values())} in {graphs_mine}; {who} recompiled)")
    only_theirs = sorted((theirs - mine).elements())
    only_mine = sorted((mine - theirs).elements())
    names = ", ".join(f"`{name}`" for name, _ in only_theirs) or "no kernel"
    instead = ", ".join(f"`{name}`" for name, _ in only_mine) or "nothing"
    return f"rank {them}: {count(n, 'kernel')}, {names} instead of {instead}"


def ranks_hover_line(index: Index, view: RunView, file: str, line: int) -> str | None:
    """The one hover line naming what the other ranks of the job made of the line (None outside a job)."""
    others = other_ranks(index, view.run)
    if not others:
        return None
    file = normalize_path(file)
    return "Other ranks — " + " · ".join(rank_line_text(view, other, file, line) for other in others)


@dataclass(frozen=True)
class RankDivergence:
    """A function whose compiled graphs differ between two ranks of a job."""

    file: str
    function: str
    line: int  # its first line whose kernels differ (else its first recorded line)
    message: str


def function_lines(view: RunView, key: tuple[str, str]) -> set[int]:
    """The function's own lines that the view's graphs hold nodes of."""
    return {frame.line for entry in view.graphs_by_function.get(key, []) for node in entry.graph.nodes.values()
            for frame in node.frames if (frame.file, frame.function) == key}


def run_divergence(view: RunView, other: RunView) -> str | None:
    """How two ranks' whole runs differ ("rank 1 of 2: 4 graphs, rank 0 of 2: 2"), None where they agree."""
    if len(view.run.graphs) != len(other.run.graphs):
        return (f"{other.run.rank_label}: {count(len(other.run.graphs), 'graph')}, {view.run.rank_label}: "
                f"{len(view.run.graphs)}")
    kernels = [Counter((k.name, k.kind) for g in v.run.graphs for k in g.kernels) for v in (view, other)]
    if kernels[0] != kernels[1]:
        return f"{other.run.rank_label} compiled other kernels than {view.run.rank_label}"
    return None


def function_divergences(view: RunView, other: RunView) -> list[RankDivergence]:
    """The functions of `view`'s run whose graphs or kernels differ on `other`'s rank."""
    found = []
    for key in sorted(set(view.graphs_by_function) | set(other.graphs_by_function)):
        file, function = key
        graphs = [len(v.graphs_by_function.get(key, [])) for v in (view, other)]
        lines = sorted(function_lines(view, key) | function_lines(other, key))
        differing = [n for n in lines if line_kernels(view, file, n) != line_kernels(other, file, n)]
        if graphs[0] == graphs[1] and not differing:
            continue
        me, them = f"rank {view.run.rank}", f"rank {other.run.rank}"
        words = []
        if graphs[0] != graphs[1]:
            words.append(f"{them} compiled it into {count(graphs[1], 'graph')}, {me} into {graphs[0]} "
                         f"({them if graphs[1] > graphs[0] else me} recompiled)")
        if differing:
            words.append(f"different kernels on {'lines' if len(differing) > 1 else 'line'} "
                         + ", ".join(map(str, differing)))
        found.append(RankDivergence(file, function, (differing or lines or [0])[0],
                                    f"Ranks diverge in `{function_label(function)}`: " + "; ".join(words)))
    return found
