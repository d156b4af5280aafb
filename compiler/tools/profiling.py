"""Profiling: eager vs compiled time per graph, per-kernel times from torch.profiler (kernels are
recorded under their names), a Chrome trace, and `profile.json` (docs/debug-directory.md)."""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import torch

from lens_format import files
from lens_format.errors import ParseError
from lens_format.kernel_map import KernelMap, read_kernel_map
from lens_format.profile import CategoryTime, EagerOp, GraphProfile, KernelTime

from compiler.machine import pch
from compiler.machine import conv_packed, linear_packed
from compiler.machine.gemm import PROFILER_NAMES
from compiler.machine.kernel_timer import KernelTimer


def time_call(run: Callable[[], object], warmup: int, iters: int) -> float:
    """Median ms of `run()` over `iters` timed calls after `warmup` untimed ones."""
    for _ in range(warmup):
        run()
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        run()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def _events(prof: torch.profiler.profile):
    return [e for e in prof.key_averages() if e.key]


# generated code calls lens.conv2d_onednn's and lens.linear_onednn's kernels directly (machine/conv_packed.py,
# linear_packed.py), which name their calls themselves
_CALLED_AS = {**PROFILER_NAMES, **{str(op): name for names in (conv_packed.PROFILER_NAMES, linear_packed.PROFILER_NAMES)
                                   for op, name in names.items()}}


def _extern_op_name(target: str) -> str:
    """`aten.bmm.default` -> `aten::bmm`, the profiler's name for it (`lens::mm` for the products generated
    code runs through compiler/machine/gemm.py, in ATen or oneDNN; oneDNN's for a packed convolution)."""
    if target in _CALLED_AS:
        return _CALLED_AS[target]
    parts = target.split(".")
    return f"{parts[0]}::{parts[1]}" if len(parts) >= 2 else target


def kernel_times(prof: torch.profiler.profile, kinds: dict[str, str], externs: dict[str, str], iters: int,
                 compiled_ms: float) -> tuple[list[KernelTime], list[CategoryTime]]:
    """Per-kernel times from a profile of `iters` calls; `externs` maps extern kernel -> aten op name, in the
    order the calls run."""
    by_key = {e.key: e for e in _events(prof)}
    per_extern = _extern_call_times(prof, externs, iters)
    rows = []
    for name, kind in kinds.items():
        if name in per_extern:
            calls, total, self_ms = per_extern[name]
            rows.append(KernelTime(name, kind, calls, total, 100 * total / compiled_ms, self_ms))
            continue
        e = by_key.get(externs.get(name, name))
        if e is None:
            continue
        total = e.cpu_time_total / 1000 / iters
        rows.append(KernelTime(name, kind, round(e.count / iters), total, 100 * total / compiled_ms,
                               e.self_cpu_time_total / 1000 / iters))
    rows.sort(key=lambda r: -r.total_ms)
    cats: dict[str, float] = {}
    for r in rows:
        cats[r.kind] = cats.get(r.kind, 0.0) + r.total_ms
    categories = [CategoryTime(k, v, 100 * v / compiled_ms) for k, v in sorted(cats.items(), key=lambda kv: -kv[1])]
    return rows, categories


def _extern_call_times(prof: torch.profiler.profile, externs: dict[str, str], iters: int
                       ) -> dict[str, tuple[int, float, float]]:
    """(calls, total ms, self ms) per iteration of each extern kernel, from the calls of its op that no other op
    made (an extern view's `aten::as_strided`, not the hundreds ATen's own ops make inside them). Kernels calling
    the same op (a layer's four `aten::mm`) run in program order, so the op's events, in time order, belong to
    them in turn; when the count does not fit (the op also ran outside the extern calls), they share the op's time
    evenly instead."""
    names: dict[str, list[str]] = {}
    for name, key in externs.items():
        names.setdefault(key, []).append(name)
    events: dict[str, list] = {key: [] for key in names}
    for e in prof.events():
        if e.name in events and not _inside_an_op(e):
            events[e.name].append(e)
    out = {}
    for key, ks in names.items():
        evs = sorted(events[key], key=lambda e: e.time_range.start)
        if not evs:
            continue
        if len(evs) == iters * len(ks):  # each extern kernel is one call site, run once a call
            for i, name in enumerate(ks):
                mine = evs[i::len(ks)]
                out[name] = (round(len(mine) / iters), sum(e.cpu_time_total for e in mine) / 1000 / iters,
                             sum(e.self_cpu_time_total for e in mine) / 1000 / iters)
        else:
            share = iters * len(ks)
            for name in ks:
                out[name] = (round(len(evs) / share), sum(e.cpu_time_total for e in evs) / 1000 / share,
                             sum(e.self_cpu_time_total for e in evs) / 1000 / share)
    return out


def _inside_an_op(e) -> bool:
    """Whether an operator's call (`aten::`, `mkldnn::`, `lens::`; not a region or a kernel's range) made `e`."""
    parent = e.cpu_parent
    while parent is not None:
        if "::" in parent.name:
            return True
        parent = parent.cpu_parent
    return False


def _with_own_times(kernels: list[KernelTime], kinds: dict[str, str], own: dict[str, tuple[float, float]],
                    externs: dict[str, str], timed_ms: float, profiled_ms: float
                    ) -> tuple[list[KernelTime], list[CategoryTime]]:
    """Generated kernels get their wrapper-timed ms; extern calls keep their profiler share of the total."""
    rows = []
    for name, (calls, ms) in own.items():
        rows.append(KernelTime(name, kinds.get(name, "pointwise"), round(calls), ms, 100 * ms / timed_ms, ms))
    for k in kernels:
        if k.name in externs:
            ms = timed_ms * k.percent / 100 if profiled_ms else 0.0
            rows.append(KernelTime(k.name, k.kind, k.calls, ms, k.percent, ms))
    rows.sort(key=lambda r: -r.total_ms)
    cats: dict[str, float] = {}
    for r in rows:
        cats[r.kind] = cats.get(r.kind, 0.0) + r.total_ms
    return rows, [CategoryTime(k, v, 100 * v / timed_ms) for k, v in sorted(cats.items(), key=lambda kv: -kv[1])]


def eager_op_times(prof: torch.profiler.profile, iters: int, limit: int = 20) -> list[EagerOp]:
    ops = [e for e in _events(prof) if e.key.startswith("aten::")]
    ops.sort(key=lambda e: -e.self_cpu_time_total)
    return [EagerOp(e.key, round(e.count / iters), e.cpu_time_total / 1000 / iters, e.self_cpu_time_total / 1000 / iters)
            for e in ops[:limit]]


def profile_graph(graph_id: str, eager: Callable[[], object] | None, compiled: Callable[[], object],
                  kinds: dict[str, str], externs: dict[str, str], warmup: int, iters: int,
                  trace_path: str | None) -> GraphProfile:
    """Time eager and compiled side by side, then profile the compiled calls per kernel (the kernels the
    program runs from now on: no size variant still building in the background, compiler/machine/runtime.py)."""
    pch.wait_for_builds()
    eager_ms = time_call(eager, warmup, iters) if eager else None
    compiled_ms = time_call(compiled, warmup, iters)
    # generated kernels are timed by their own wrappers in a plain loop: the profiler's thread
    # competes with OpenMP workers on small machines and would inflate short kernels many times over
    # (medians, like compiled_ms: a shared machine stalls threads now and then)
    KernelTimer.reset()
    KernelTimer.enabled = True
    try:
        timed_ms = time_call(compiled, 0, iters)
    finally:
        KernelTimer.enabled = False
    own = {name: (len(t) / iters, statistics.median(t) * 1000 * len(t) / iters)
           for name, t in KernelTimer.totals.items()}
    timed_ms = max(timed_ms, sum(ms for _, ms in own.values()))
    activities = [torch.profiler.ProfilerActivity.CPU]
    # warm-up steps inside the profiler keep its first-call costs out of the kernel times
    sched = torch.profiler.schedule(wait=0, warmup=2, active=iters, repeat=1)
    with torch.profiler.profile(activities=activities, schedule=sched) as prof:
        for _ in range(iters + 2):
            compiled()
            prof.step()
    if trace_path:
        prof.export_chrome_trace(trace_path)
    # every event's self time, summed: the profiled call's total (kernel times nest inside it)
    profiled_ms = sum(e.self_cpu_time_total for e in _events(prof)) / 1000 / iters
    kernels, categories = kernel_times(prof, kinds, externs, iters, max(profiled_ms, 1e-9))
    if own:  # replace profiler times of generated kernels by their own timings, relative to timed_ms
        kernels, categories = _with_own_times(kernels, kinds, own, externs, timed_ms, profiled_ms)
        profiled_ms = timed_ms
    eager_ops: list[EagerOp] = []
    if eager is not None:
        with torch.profiler.profile(activities=activities, schedule=sched) as eprof:
            for _ in range(iters + 2):
                eager()
                eprof.step()
        eager_ops = eager_op_times(eprof, iters)
    return GraphProfile(graph_id, eager_ms, compiled_ms, iters=iters, profiled_ms=profiled_ms, kernels=kernels,
                        categories=categories, eager_ops=eager_ops)


def format_profile(p: GraphProfile) -> str:
    """A plain-text report (the CLI prints a rich table; output_code.py -p prints this)."""
    lines = [f"== {p.graph_id}: compiled {p.compiled_ms:.4f} ms/iter"
             + (f", eager {p.eager_ms:.4f} ms/iter, speedup {p.ratio():.2f}x" if p.eager_ms else "")]
    for c in p.categories:
        lines.append(f"  == {c.kind} category kernels ==  {c.total_ms:.4f} ms  {c.percent:.1f}%")
        lines.append(f"  {'Kernel':<48} {'ms/iter':>10} {'calls':>6} {'percent':>8}")
        for k in p.kernels:
            if k.kind == c.kind:
                lines.append(f"  {k.name:<48} {k.total_ms:>10.4f} {k.calls:>6} {k.percent:>7.1f}%")
    covered = sum(c.percent for c in p.categories)
    lines.append(f"Percent of profiled time in kernels: {covered:.1f}% (of {p.profiled_ms:.4f} ms per call "
                 f"under the profiler)")
    return "\n".join(lines)


def benchmark_module(call: Callable, get_args: Callable, times: int = 10, repeat: int = 10) -> float:
    """Median ms per call of `call(get_args())` (inputs made outside the timed region)."""
    samples = []
    for _ in range(repeat):
        arg_sets = [get_args() for _ in range(times)]
        start = time.perf_counter()
        for a in arg_sets:
            call(a)
        samples.append((time.perf_counter() - start) * 1000 / times)
    return statistics.median(samples)


def _kernel_map_beside(path: str) -> KernelMap | None:
    try:
        return read_kernel_map(Path(path).resolve().parent / files.KERNEL_MAP)
    except ParseError:
        return None


def extern_targets(kernel_map: KernelMap | None) -> dict[str, str]:
    """Extern kernel name -> the profiler's name for the op it calls (the kernel's `target`, else its node's)."""
    if kernel_map is None:
        return {}
    targets = {n.name: n.target for n in kernel_map.nodes}
    return {k.name: _extern_op_name(k.target or targets.get(k.nodes[0], "")) for k in kernel_map.kernels
            if k.kind == "extern" and (k.target or k.nodes)}


def profile_module(call: Callable, get_args: Callable, path: str, kinds: dict[str, str],
                   iters: int = 20) -> GraphProfile:
    """`python output_code.py -p`: profile the compiled module alone and print per-category tables."""
    kmap = _kernel_map_beside(path)
    externs = extern_targets(kmap)
    all_kinds = dict(kinds)
    all_kinds.update({name: "extern" for name in externs})
    trace = os.path.join(os.path.dirname(os.path.abspath(path)), "compiled_module_profile.json")
    graph_id = kmap.graph_id or "compiled module" if kmap else "compiled module"
    args = get_args()
    p = profile_graph(graph_id, None, lambda: call(list(args)), all_kinds, externs, 3, iters, trace)
    print(format_profile(p))
    print(f"Chrome trace for the profile is written to {trace}")
    return p



def output_code_main(call: Callable, get_args: Callable, path: str, kinds: dict[str, str]) -> None:
    """`python output_code.py` benchmarks the module; `-p` profiles it per kernel and writes a trace."""
    if "-p" in sys.argv:
        profile_module(call, get_args, path, kinds)
    else:
        ms = benchmark_module(call, get_args)
        print(f"{ms:.6f} ms per call")
