"""Accuracy checking: compiled vs eager on the same inputs, and the first FX node whose output differs.

The node search compiles the aten graph once more with every intermediate value as an output (each
buffer instrumented), runs it on the recorded inputs, and compares values in topological order.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Callable

import torch
import torch.fx

DEFAULT_TOL = 1e-4


def accuracy_settings() -> float | None:
    """The tolerance when running under `kernel-lens check-accuracy` (LENS_CHECK_ACCURACY=tol)."""
    spec = os.environ.get("LENS_CHECK_ACCURACY")
    if not spec:
        return None
    try:
        return float(spec)
    except ValueError:
        return DEFAULT_TOL


@dataclass
class Difference:
    max_abs_error: float
    max_rel_error: float


def compare(expected, got, tol: float) -> Difference | None:
    """None when `got` matches `expected` (floats within atol=rtol=tol, NaN where NaN; others exact)."""
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return Difference(float("inf"), float("inf"))
        for e, g in zip(expected, got):
            d = compare(e, g, tol)
            if d is not None:
                return d
        return None
    if not isinstance(expected, torch.Tensor):
        return None if expected == got else Difference(float("inf"), float("inf"))
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape or got.dtype != expected.dtype:
        return Difference(float("inf"), float("inf"))
    e, g = expected.detach().double(), got.detach().double()
    nan_e, nan_g = torch.isnan(e), torch.isnan(g)
    if not torch.equal(nan_e, nan_g):
        return Difference(float("nan"), float("nan"))
    e, g = e.masked_fill(nan_e, 0), g.masked_fill(nan_g, 0)
    same_inf = (e == g)  # equal infinities have nan differences otherwise
    diff = (e - g).abs().masked_fill(same_inf, 0)
    rel = diff / e.abs().clamp_min(1e-12)
    exact = not expected.dtype.is_floating_point and not expected.dtype.is_complex
    bad = diff > 0 if exact else diff > tol + tol * e.abs()
    if not bool(bad.any()):
        return None
    return Difference(float(diff.max()), float(rel.masked_fill(diff == 0, 0).max()))


@dataclass
class DivergingNode:
    name: str
    target: str
    difference: Difference


def first_diverging_node(gm: torch.fx.GraphModule, inputs: list, tol: float,
                         compile_fn: Callable[[torch.fx.GraphModule, list], Callable]) -> DivergingNode | None:
    """The first call_function node (in graph order) whose compiled value differs from eager."""
    eager_values: dict[str, object] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            if n.op == "call_function":
                eager_values[n.name] = out
            return out

    Recorder(gm).run(*[_clone(a) for a in inputs])
    instrumented = copy.deepcopy(gm)
    graph = instrumented.graph
    watched = [n for n in graph.nodes if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor)]
    out_node = next(n for n in graph.nodes if n.op == "output")
    graph.erase_node(out_node)
    graph.output(tuple(watched))
    instrumented.recompile()
    compiled = compile_fn(instrumented, [_clone(a) for a in inputs])
    values = compiled([_clone(a) for a in inputs])
    for node, got in zip(watched, values):
        d = compare(eager_values[node.name], got, tol)
        if d is not None:
            return DivergingNode(node.name, _target(node), d)
    return None


def _target(node: torch.fx.Node) -> str:
    t = node.target
    if isinstance(t, torch._ops.OpOverload):
        return f"{t.namespace}.{t._opname}.{t._overloadname}"
    return getattr(t, "__name__", str(t))


def _clone(a):
    return a.detach().clone() if isinstance(a, torch.Tensor) else a


def clone_args(args) -> list:
    return [_clone(a) for a in args]


def accuracy_report(graph, node: DivergingNode | None, tol: float) -> dict:
    """accuracy.json (docs/debug-directory.md) for one lens graph (a frontend.CompiledGraph)."""
    data: dict = {"version": 1, "graph_id": graph.graph_id, "status": "mismatch" if node else "ok",
                  "atol": tol, "rtol": tol}
    if node is None:
        return data
    kmap = graph.kernel_map
    src = graph.readable.sources.get(node.name)
    kernel = next((k["name"] for k in kmap.kernels if node.name in k["nodes"]), None) if kmap else None
    data.update({"node": node.name, "target": node.target, "readable_line": graph.readable.lines.get(node.name),
                 "kernel": kernel, "source": src.to_json() if src else None,
                 "max_abs_error": node.difference.max_abs_error, "max_rel_error": node.difference.max_rel_error})
    return data


def _as_list(x):
    return list(x) if isinstance(x, (tuple, list)) else x


def compare_on_first_call(eager: Callable, compiled: Callable, tol: float,
                          on_result: Callable[[Difference | None], None]) -> Callable:
    """Wrap a compiled graph: its first call also runs `eager` on cloned inputs and hands the difference
    (None when they match) to `on_result`; later calls run the compiled graph alone."""
    done = False

    def run(*args):
        nonlocal done
        if done:
            return compiled(*args)
        done = True
        expected = eager(*clone_args(args))
        got = compiled(*args)
        on_result(compare(_as_list(expected), _as_list(got), tol))
        return got

    return run


def check_on_first_call(eager: Callable, compiled: Callable, graphs: list, tol: float,
                        compile_fn: Callable[[torch.fx.GraphModule, list], Callable]) -> Callable:
    """On a mismatch at the first call, each lens graph the Dynamo graph produced is searched for its
    first diverging node; accuracy.json is written either way."""
    def report(mismatch: Difference | None) -> None:
        for g in graphs:
            node = None
            if mismatch is not None and getattr(g, "recorded_inputs", None) is not None:
                node = first_diverging_node(g.gm, g.recorded_inputs, tol, compile_fn)
            _report(g, node, tol, mismatch)

    return compare_on_first_call(eager, compiled, tol, report)


def _report(graph, node: DivergingNode | None, tol: float, mismatch: Difference | None) -> None:
    data = accuracy_report(graph, node, tol)
    if mismatch is not None and node is None:
        data.update({"status": "mismatch", "node": None, "max_abs_error": mismatch.max_abs_error,
                     "max_rel_error": mismatch.max_rel_error})
    if graph.debug:
        graph.debug.accuracy(data)
        if data["status"] == "mismatch" and graph.kernel_map is not None:
            graph.kernel_map.status = "accuracy_error"
            graph.debug.kernel_map(graph.kernel_map.to_json())
    if data["status"] == "mismatch":
        src = data.get("source")
        where = f" at {src['file']}:{src['line']} `{src['code']}`" if src else ""
        print(f"kernel-lens accuracy: {graph.graph_id}: MISMATCH; first diverging node "
              f"{data.get('node')} ({data.get('target')}){where}: max abs error {data['max_abs_error']:.6g}, "
              f"max rel error {data['max_rel_error']:.6g} (tol {tol})", flush=True)
    else:
        print(f"kernel-lens accuracy: {graph.graph_id}: ok (tol {tol})", flush=True)
