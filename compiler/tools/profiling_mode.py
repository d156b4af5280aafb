"""`kernel-lens profile`'s mode (LENS_PROFILE=warmup:iters) as a `hooks.Tool`: each Dynamo graph's first call is
profiled eager vs compiled (profiling.py), then, in grad mode, its backward graph against eager's backward of the
same outputs; every graph of a training iteration (forward, backward, a compiled optimizer step) gets its
`profile.json`, or a line saying why not."""
from __future__ import annotations

import os
from typing import Callable

import torch

from compiler import hooks
from compiler.tools.first_call import AttributeSnapshot, backward_passes, graph_attributes, input_copies
from compiler.tools.profiling import extern_targets, profile_graph, time_call
from lens_format.profile import GraphProfile


def profiling_settings() -> tuple[int, int] | None:
    """(warmup, iters) when the process runs under `kernel-lens profile` (LENS_PROFILE=warmup:iters)."""
    spec = os.environ.get("LENS_PROFILE")
    if not spec:
        return None
    try:
        warmup, iters = (int(x) for x in spec.split(":"))
        return max(warmup, 0), max(iters, 1)
    except ValueError:
        return 3, 20


def profile_on_first_call(eager: Callable, compiled: Callable, graphs: list, settings: tuple[int, int]) -> Callable:
    """Wrap a compiled Dynamo graph: its first call is profiled (eager vs compiled on cloned inputs,
    per-kernel times, trace) into the debug dir of the lens graph(s) it produced, then, in grad mode, its
    backward (profile_backward), then the program's call runs."""
    done = False

    def run(*args):
        nonlocal done
        if not done:
            done = True
            attrs = AttributeSnapshot(graph_attributes(eager))  # an optimizer step's parameters: put back after
            try:
                _profile_graphs(eager, compiled, graphs, args, settings)
                attrs.after_run()
                _profile_backward(eager, compiled, args, settings)
            except Exception as e:  # profiling must never break the user's program
                print(f"kernel-lens: profiling failed: {type(e).__name__}: {e}", flush=True)
            finally:
                attrs.after_run()
        return compiled(*args)

    return run


def _say(graph, p: GraphProfile) -> None:
    speed = f"{p.ratio():.2f}x" if p.ratio() else "n/a"
    eager = f"{p.eager_ms:.4f} ms" if p.eager_ms is not None else "n/a"
    kind = graph.kernel_map.graph_kind if graph.kernel_map is not None else ""
    label = f"{graph.graph_id} ({kind})" if kind else graph.graph_id
    print(f"kernel-lens profile: {label}: eager {eager}, compiled {p.compiled_ms:.4f} ms, speedup {speed}",
          flush=True)


def _profile_graphs(eager: Callable, compiled: Callable, graphs: list, args: tuple, settings) -> None:
    target = next((g for g in graphs if g.kernel_map is not None), None)
    for g in graphs:  # (a backward graph compiled with its forward, over size symbols, is profiled at its call)
        if g is not target and (g.kernel_map is None or g.kernel_map.graph_kind != "backward"):
            print(f"kernel-lens profile: {g.graph_id}: not profiled: "
                  + ("it runs eagerly (no generated code)" if g.kernel_map is None
                     else f"the Dynamo graph's time is {target.graph_id}'s"), flush=True)
    if target is None:
        return
    warmup, iters = settings
    clone = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
    with torch.no_grad():
        p = profile_graph(target.graph_id, lambda: eager(*clone), lambda: compiled(*clone),
                          *_kernels_of(target), warmup, iters, _trace_path(target))
    if target.debug:
        target.debug.profile(p.to_json())
    _say(target, p)


def _kernels_of(graph) -> tuple[dict[str, str], dict[str, str]]:
    """(kernel -> kind, extern kernel -> the profiler's name of its op) of a lens graph."""
    return {k.name: k.kind for k in graph.kernel_map.kernels}, extern_targets(graph.kernel_map)


def _trace_path(graph) -> str | None:
    return os.path.join(graph.debug.path, "trace.json") if graph.debug and graph.debug.path else None


# eager's backward of the Dynamo graph whose compiled backward runs now (set while profile_backward runs it)
_EAGER_BACKWARD: Callable[[], object] | None = None


def _profile_backward(eager: Callable, compiled: Callable, args: tuple, settings) -> None:
    """In grad mode: both sides' forward on copies of the inputs, then the compiled backward run once with seeded
    output gradients. That call (the backward graph compiles at it) profiles the backward graph against eager's
    backward of the same outputs (`_profiling_backward`)."""
    global _EAGER_BACKWARD
    copies_e, copies_c = input_copies(args), input_copies(args)
    passes = backward_passes(eager(*copies_e), compiled(*copies_c), copies_e, copies_c)
    if passes is None:
        return
    eager_pass, compiled_pass = passes
    _EAGER_BACKWARD = lambda: eager_pass.run(retain=True)  # noqa: E731
    try:
        compiled_pass.run()
    finally:
        _EAGER_BACKWARD = None


def _profiling_backward(graph, call: Callable) -> Callable:
    """A backward graph's first call under profile_backward profiles it (its inputs cloned: saved tensors and
    output gradients); a first call from anywhere else says why it was not profiled."""
    if graph.kernel_map is None or graph.kernel_map.graph_kind != "backward":
        return call
    done = False

    def run(args):
        nonlocal done
        if not done:
            done = True
            eager = _EAGER_BACKWARD
            if eager is None:
                print(f"kernel-lens profile: {graph.graph_id} (backward): not profiled: its first call came from "
                      f"no profiled forward", flush=True)
            else:
                try:
                    _profile_backward_graph(graph, call, list(args), eager)
                except Exception as e:  # profiling must never break the user's program
                    print(f"kernel-lens profile: {graph.graph_id} (backward): profiling failed: "
                          f"{type(e).__name__}: {e}", flush=True)
        return call(args)

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def _profile_backward_graph(graph, call: Callable, args: list, eager: Callable[[], object]) -> None:
    warmup, iters = profiling_settings() or (3, 20)
    clone = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
    with torch.no_grad():
        p = profile_graph(graph.graph_id, None, lambda: call(list(clone)), *_kernels_of(graph), warmup, iters,
                          _trace_path(graph))
    with torch.enable_grad():
        p.eager_ms = time_call(eager, warmup, iters)
    if graph.debug:
        graph.debug.profile(p.to_json())
    _say(graph, p)


def _profiling(eager: Callable, compiled: Callable, graphs: list) -> Callable:
    return profile_on_first_call(eager, compiled, graphs, profiling_settings())


# a warm start from the graph cache would have nothing to profile; the profile shows Dynamo's own markers
TOOL = hooks.Tool("profiling", active=lambda: profiling_settings() is not None, wrap_dynamo_graph=_profiling,
                  wrap_graph=_profiling_backward, uses_graph_cache=False, keeps_profiler_markers=True)
