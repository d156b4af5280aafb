"""Turns real Inductor's `python output_code.py -p` results (benchmark_output.txt, else benchmark_trace.json)
into the graph's profile: per-kernel device time and share, per-category totals, busy %, device.

GPU runs print per-category tables; CPU runs print only the profiler table, so the categories are made
from the kernels' kinds (Inductor gives CPU users no breakdown; we do).
"""
from __future__ import annotations

from pathlib import Path

from lens_format.profile import CategoryTime, GraphProfile, KernelTime
from lsp_server.model import Kernel
from lsp_server.parsers.inductor_benchmark import BenchmarkOutput, ChromeTrace, ProfilerRow

ATEN_PREFIX, EXTERN_PREFIX = "aten::", "extern_kernels."  # a CPU profile's `aten::mm` row is `extern_kernels.mm`
# Inductor's category table → our kernel kind (cuBLAS / cutlass calls are `unknown`: extern calls)
CATEGORY_KIND: dict[str, str] = {
    "triton_pointwise": "pointwise", "triton_reduction": "reduction",
    "triton_persistent_reduction": "persistent_reduction", "triton_unknown": "unknown", "unknown": "extern",
}


def kernel_named(name: str, kernels: list[Kernel]) -> Kernel | None:
    """The kernel a profiler name stands for: exact, cut by Inductor (a prefix), or a record-function
    name such as `graph_0_cpp_fused_add_0` (a suffix)."""
    exact = next((k for k in kernels if k.name == name), None)
    if exact is not None:
        return exact
    if name.startswith(ATEN_PREFIX):  # `aten::mm`: the graph's one `extern_kernels.mm` call, if just one
        calls = [k for k in kernels if k.kind == "extern" and k.name == EXTERN_PREFIX + name[len(ATEN_PREFIX):]]
        return calls[0] if len(calls) == 1 else None
    return next((k for k in kernels if k.name.startswith(name) or name.endswith("_" + k.name)), None)


def category_profile(path: Path, graph_id: str, output: BenchmarkOutput, kernels: list[Kernel]) -> GraphProfile:
    device = (output.busy_device or (output.categories[0].device if output.categories else "") or "cuda").lower()
    profile = GraphProfile(graph_id, None, output.wall_ms, device=device, busy_percent=output.busy_percent,
                           path=path)
    for table in output.categories:
        kind = CATEGORY_KIND.get(table.category, table.category)
        for row in table.kernels:
            kernel = kernel_named(row.name, kernels)
            profile.kernels.append(KernelTime(kernel.name if kernel else row.name, kind, round(row.count),
                                              row.device_ms, row.percent))
        total_ms = table.total_ms if table.total_ms is not None else sum(k.device_ms for k in table.kernels)
        percent = table.total_percent if table.total_percent is not None else table.kernel_percent_sum
        profile.categories.append(CategoryTime(kind, total_ms, percent))
    return profile


def timed_profile(path: Path, graph_id: str, timed: list[tuple[str, int, float]], wall_ms: float | None,
                  kernels: list[Kernel], device: str, profiled_total_ms: float | None = None) -> GraphProfile:
    """From (profiler name, calls, summed ms over all profiled runs) rows: time per run and share of one run:
    of its wall time, or of the profiled run's total (`profiled_total_ms` over all runs) where the kernels
    under the profiler took longer than the plain run (a busy machine): shares never pass 100%."""
    runs = min((calls for _, calls, _ in timed), default=1) or 1  # every kernel runs at least once a run
    per_run = [(name, calls, total / runs) for name, calls, total in timed]
    profiled_ms = profiled_total_ms / runs if profiled_total_ms else None
    whole = max(wall_ms or 0.0, profiled_ms or 0.0, sum(ms for _, _, ms in per_run)) or 1.0
    profile = GraphProfile(graph_id, None, wall_ms, profiled_ms=profiled_ms, device=device, path=path)
    categories: dict[str, CategoryTime] = {}
    for name, calls, ms in per_run:
        kernel = kernel_named(name, kernels)
        kind = kernel.kind if kernel else "unknown"
        profile.kernels.append(KernelTime(kernel.name if kernel else name, kind, max(calls // runs, 1), ms,
                                          100.0 * ms / whole))
        share = categories.setdefault(kind, CategoryTime(kind, 0.0, 0.0))
        share.total_ms += ms
        share.percent += 100.0 * ms / whole
    profile.categories = sorted(categories.values(), key=lambda c: -c.total_ms)
    profile.busy_percent = min(sum(c.percent for c in profile.categories), 100.0)
    return profile


def extern_rows(output: BenchmarkOutput, kernels: list[Kernel]) -> list[ProfilerRow]:
    """A CPU profile's rows of the graph's extern calls (`aten::mm` for its `extern_kernels.mm`)."""
    rows = output.profiler.rows if output.profiler else ()
    return [r for r in rows if r.name.startswith(ATEN_PREFIX) and kernel_named(r.name, kernels) is not None]


def benchmark_profile(path: Path, graph_id: str, output: BenchmarkOutput | None, trace: ChromeTrace | None,
                      kernels: list[Kernel]) -> GraphProfile | None:
    """The graph's profile from `-p` output (categories on GPU, profiler rows on CPU), else its trace."""
    if output is not None and output.categories:
        return category_profile(path, graph_id, output, kernels)
    if output is not None and output.cpu_kernel_rows():
        rows = [(r.name, r.calls or 1, (r.self_cpu_us or 0.0) / 1000)
                for r in (*output.cpu_kernel_rows(), *extern_rows(output, kernels))]
        total_us = output.profiler.self_cpu_total_us if output.profiler else None
        return timed_profile(path, graph_id, rows, output.wall_ms, kernels, "cpu",
                             total_us / 1000 if total_us else None)
    if trace is not None and trace.kernels:
        device = "cpu" if all(k.category == "cpu_op" for k in trace.kernels) else "cuda"
        rows = [(t.name, t.calls, t.total_us / 1000) for t in trace.totals()]
        return timed_profile(path, graph_id, rows, output.wall_ms if output else None, kernels, device)
    return None
