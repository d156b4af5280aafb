"""`kernel-lens check-accuracy`'s mode (LENS_CHECK_ACCURACY=tol) as a `hooks.Tool`: each Dynamo graph's first call
is checked against eager, forward and backward (first_call.py); the graph that differs first, forward or
backward, is searched for its first diverging FX node (accuracy.first_diverging_node); every lens graph gets
its `accuracy.json`."""
from __future__ import annotations

import os
from typing import Callable

from compiler import hooks
from compiler.tools.accuracy import (DEFAULT_TOL, Difference, DivergingNode, accuracy_report, clone_args,
                                     difference_fields, first_diverging_node)
from compiler.tools.first_call import FirstCallCheck, check_first_call, placeholder_names
from lens_format.accuracy import AccuracyReport

_COMPILED: list = []  # the lens graphs with generated code compiled under this mode, in order (backward ones too)


def accuracy_settings() -> float | None:
    """The tolerance when running under `kernel-lens check-accuracy` (LENS_CHECK_ACCURACY=tol)."""
    spec = os.environ.get("LENS_CHECK_ACCURACY")
    if not spec:
        return None
    try:
        return float(spec)
    except ValueError:
        return DEFAULT_TOL


def graph_kind(graph) -> str:
    """forward | backward | inference (AOTAutograd's graph), "" for a graph without generated code."""
    return graph.kernel_map.graph_kind if graph.kernel_map is not None else ""


def _recording_inputs(graph, call: Callable) -> Callable:
    """Keeps a graph's first real inputs, for the node search after a mismatch."""
    _COMPILED.append(graph)

    def run(args):
        if graph.recorded_inputs is None:
            graph.recorded_inputs = clone_args(args)
        return call(args)

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def checked_on_first_call(eager: Callable, compiled: Callable, graphs: list, tol: float,
                          compile_fn: Callable) -> Callable:
    """Wrap a compiled Dynamo graph: its first call is checked forward and backward (the backward graph compiles
    during the check, at its first backward pass), each lens graph reported; then the program's call runs."""
    names = placeholder_names(eager)
    done = False

    def run(*args):
        nonlocal done
        if not done:
            done = True
            start = len(_COMPILED)
            check = check_first_call(eager, compiled, args, tol, names)
            # (AOTAutograd compiles a backward at its first call, or with the forward when sizes are symbolic)
            mine = list(graphs) + [g for g in _COMPILED[start:] if g not in graphs]
            backward = [g for g in mine if graph_kind(g) == "backward"]
            report_check(check, [g for g in mine if g not in backward], backward, tol, compile_fn)
        return compiled(*args)

    return run


def _search(graph, tol: float, compile_fn: Callable) -> DivergingNode | None:
    if graph.recorded_inputs is None or graph.gm is None:
        return None
    return first_diverging_node(graph.gm, graph.recorded_inputs, tol, compile_fn)


def report_check(check: FirstCallCheck, forward: list, backward: list, tol: float, compile_fn: Callable) -> None:
    """Search the graphs whose part of the check differs, forward first, and write every graph's report. A backward
    graph whose own nodes match eager on its inputs, behind a forward that differs, only inherits the difference."""
    first = check.first()
    if first is not None:
        what, d = first
        print(f"kernel-lens accuracy: the compiled graph's {what} differ from eager's: {check.describe(what, d)}",
              flush=True)
    fwd = check.forward
    for graph in forward:
        node = _search(graph, tol, compile_fn) if fwd is not None else None
        _report(graph, node, tol, fwd, check.describe("outputs" if check.outputs else "inputs changed in place",
                                                      fwd) if fwd else "")
    for graph in backward:
        d = check.gradients
        node = _search(graph, tol, compile_fn) if d is not None else None
        if node is None and fwd is not None:
            d = None  # its own ops give eager's values on its inputs: the forward's difference reached it
        _report(graph, node, tol, d, check.describe("gradients", d) if d else "")


def _place(report: AccuracyReport, kind: str) -> str:
    src = report.source
    if src is None:
        return ""
    where = f"{src.file}:{src.line} `{src.code}`"
    return f" in the backward of {where}" if kind == "backward" else f" at {where}"


def _report(graph, node: DivergingNode | None, tol: float, mismatch: Difference | None, summary: str) -> None:
    report = accuracy_report(graph, node, tol)
    if mismatch is not None and node is None:
        fields = difference_fields(mismatch) | {"summary": summary or mismatch.describe()}
        report = AccuracyReport(graph.graph_id, "mismatch", tol, tol, **fields)
    if graph.debug:
        graph.debug.accuracy(report.to_json())
        if report.status == "mismatch" and graph.kernel_map is not None:
            graph.kernel_map.status = "accuracy_error"
            graph.debug.kernel_map(graph.kernel_map.to_json())
    kind = graph_kind(graph)
    label = f"{graph.graph_id} ({kind})" if kind else graph.graph_id
    if report.status == "mismatch":
        found = (f"first diverging node {report.node} ({report.target}){_place(report, kind)}" if report.node
                 else f"no single diverging node found; its {'gradients' if kind == 'backward' else 'outputs'}")
        print(f"kernel-lens accuracy: {label}: MISMATCH; {found}: {report.summary}", flush=True)
    else:
        print(f"kernel-lens accuracy: {label}: ok (atol {tol:g}, rtol {tol:g})", flush=True)


def _checking(eager: Callable, compiled: Callable, graphs: list) -> Callable:
    from compiler.pipeline import compile_quietly  # (not at the top: the tools are imported before the pipeline)
    return checked_on_first_call(eager, compiled, graphs, accuracy_settings(), compile_quietly)


TOOL = hooks.Tool("accuracy", active=lambda: accuracy_settings() is not None, wrap_graph=_recording_inputs,
                  wrap_dynamo_graph=_checking, uses_graph_cache=False)
