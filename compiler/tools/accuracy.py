"""Accuracy checking: compiled vs eager on the same inputs, and the first FX node whose output differs.

The node search compiles the aten graph once more with every intermediate value as an output (each
buffer instrumented), runs it on the recorded inputs, and compares values in topological order.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.fx

from lens_format.accuracy import AccuracyReport

DEFAULT_TOL = 1e-4


@dataclass
class WorstElement:
    """The failing element furthest outside its allowance atol + rtol * |expected|."""
    index: tuple[int, ...]
    expected: float
    got: float
    abs_error: float
    rel_error: float | None  # None where expected is 0: no relative error exists there

    def to_json(self) -> dict:
        return {"index": list(self.index), "expected": self.expected, "got": self.got,
                "abs_error": self.abs_error, "rel_error": self.rel_error}


@dataclass
class Difference:
    """How `got` differs from `expected`, judged as torch.testing.assert_close judges: an element fails when
    |got - expected| > atol + rtol * |expected|. The errors describe the failing elements only, and the
    relative error only those with |expected| > atol: dividing by a near-zero expected value measures
    nothing (it once reported 7.8e12 for an output of zeros)."""
    max_abs_error: float
    max_rel_error: float  # nan when no failing element has |expected| > atol
    atol: float = 0.0
    rtol: float = 0.0
    mismatched: int = 0
    numel: int = 0
    worst: WorstElement | None = None
    # which bound the failing elements exceeded (_TOLERANCE_TEXT): atol | rtol | both; exact (no tolerance:
    # an integer dtype or atol = rtol = 0); infinity (only infinities differ); "" (a structural difference)
    failed_tolerance: str = ""
    reason: str = ""  # a structural difference: length, type, shape, dtype or where NaNs are
    output: int | None = None  # which element of a list of outputs differs

    def describe(self) -> str:
        """One line for a person: what failed, by how much, and against which tolerance."""
        where = f"output {self.output}: " if self.output is not None else ""
        if self.reason:
            return where + self.reason
        if self.failed_tolerance == "exact":
            head = f"{self.mismatched} of {self.numel} element(s) differ (compared exactly)"
        else:
            head = (f"{self.mismatched} of {self.numel} element(s) outside |got - expected| <= atol + rtol * "
                    f"|expected| (atol {self.atol:g}, rtol {self.rtol:g}); {self._which_bound()}")
        w = self.worst
        worst = ""
        if w is not None:
            rel = (f"{w.rel_error:.6g}" if w.rel_error is not None
                   else "none (expected 0)" if w.expected == 0 else "none (an infinity)")
            worst = (f"; worst at {list(w.index)}: expected {w.expected:.6g}, got {w.got:.6g}, abs error "
                     f"{w.abs_error:.6g}, rel error {rel}")
        rel = (f"{self.max_rel_error:.6g}" if not math.isnan(self.max_rel_error)
               else "none (no failing element has |expected| > atol)")
        return f"{where}{head}{worst}; max abs error {self.max_abs_error:.6g}, max rel error {rel}"

    def _which_bound(self) -> str:
        # below |expected| = atol/rtol the atol term is the larger part of an element's allowance, above it
        # the rtol term: that is the tolerance whose loosening would let the failing elements pass
        if self.failed_tolerance == "infinity":
            return "an infinity differs (infinities match only themselves, whatever the tolerance)"
        if self.rtol == 0:
            return "the atol bound failed (rtol is 0)"
        edge = f"atol/rtol = {self.atol / self.rtol:g}"
        return {"atol": f"the atol bound failed: every failing element has |expected| <= {edge}, where atol is "
                        f"the larger part of the allowance",
                "rtol": f"the rtol bound failed: every failing element has |expected| > {edge}, where rtol * "
                        f"|expected| is the larger part of the allowance",
                "both": f"both bounds failed: failing elements on both sides of |expected| = {edge}"
                }[self.failed_tolerance]


def _structural(reason: str) -> Difference:
    return Difference(float("inf"), float("inf"), reason=reason)


def compare(expected, got, tol: float) -> Difference | None:
    """None when `got` matches `expected` (floats within atol=rtol=tol, NaN where NaN; others exact)."""
    if isinstance(expected, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(expected):
            return _structural(f"{len(expected)} output(s) expected, got "
                               f"{len(got) if isinstance(got, (list, tuple)) else type(got).__name__}")
        for i, (e, g) in enumerate(zip(expected, got)):
            d = compare(e, g, tol)
            if d is not None:
                d.output = i if d.output is None else d.output
                return d
        return None
    if not isinstance(expected, torch.Tensor):
        return None if expected == got else _structural(f"expected {expected!r}, got {got!r}")
    if not isinstance(got, torch.Tensor):
        return _structural(f"expected a tensor, got {type(got).__name__}")
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return _structural(f"expected {tuple(expected.shape)} {expected.dtype}, got {tuple(got.shape)} {got.dtype}")
    return _compare_tensors(expected, got, tol)


def _compare_tensors(expected: torch.Tensor, got: torch.Tensor, tol: float) -> Difference | None:
    exact = not expected.dtype.is_floating_point and not expected.dtype.is_complex
    atol = rtol = 0.0 if exact else tol
    e, g = expected.detach().double(), got.detach().double()
    nan_e, nan_g = torch.isnan(e), torch.isnan(g)
    if not torch.equal(nan_e, nan_g):
        n = int((nan_e != nan_g).sum())
        return Difference(float("nan"), float("nan"), atol, rtol, n, e.numel(),
                          reason=f"NaN pattern differs at {n} of {e.numel()} element(s)")
    e, g = e.masked_fill(nan_e, 0), g.masked_fill(nan_g, 0)
    diff = (e - g).abs().masked_fill(e == g, 0)  # equal infinities have nan differences otherwise
    allowed = atol + rtol * e.abs()
    finite = torch.isfinite(e) & torch.isfinite(g)
    # an infinity matches only itself, whatever the tolerance (as in assert_close)
    bad = torch.where(finite, diff > allowed, e != g)
    if not bool(bad.any()):
        return None
    infinite_bad = bad & ~finite
    bad_e, bad_diff = e.abs()[bad & finite], diff[bad & finite]
    meaningful = bad_e > atol
    max_rel = float((bad_diff[meaningful] / bad_e[meaningful]).max()) if bool(meaningful.any()) else float("nan")
    if bool(infinite_bad.any()):
        over = infinite_bad.double()
    else:  # the element furthest outside its allowance; where none is allowed, the error itself decides
        over = torch.where(bad, diff / allowed, torch.zeros_like(diff))
        if bool(torch.isinf(over).any()):
            over = torch.where(torch.isinf(over), diff, torch.zeros_like(diff))
    flat = int(over.flatten().argmax())
    idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), e.shape)) if e.dim() else ()
    we, wg, wd = float(e[idx]), float(g[idx]), float(diff[idx])
    worst = WorstElement(idx, we, wg, wd, wd / abs(we) if we != 0 and math.isfinite(we + wd) else None)
    if atol == rtol == 0:
        failed = "exact"
    elif bad_e.numel() == 0:
        failed = "infinity"
    else:
        rtol_side = rtol * bad_e > atol
        failed = "rtol" if bool(rtol_side.all()) else "both" if bool(rtol_side.any()) else "atol"
    max_abs = float("inf") if bool(infinite_bad.any()) else float(bad_diff.max())
    return Difference(max_abs, max_rel, atol, rtol, int(bad.sum()), e.numel(), worst, failed)


def difference_fields(d: Difference) -> dict:
    """accuracy.json's fields for a difference (docs/debug-directory.md), as `AccuracyReport` keywords.
    max_rel_error is None (null) when no failing element has |expected| > atol (JSON has no nan)."""
    no_rel = math.isnan(d.max_rel_error) and not d.reason
    return {"max_abs_error": d.max_abs_error, "max_rel_error": None if no_rel else d.max_rel_error,
            "mismatched_elements": d.mismatched, "elements": d.numel, "failed_tolerance": d.failed_tolerance,
            "worst": d.worst.to_json() if d.worst else None, "output": d.output, "summary": d.describe()}


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


def accuracy_report(graph, node: DivergingNode | None, tol: float) -> AccuracyReport:
    """accuracy.json (docs/debug-directory.md) for one lens graph (a compiled_graph.CompiledGraph)."""
    if node is None:
        return AccuracyReport(graph.graph_id, "ok", tol, tol)
    kmap = graph.kernel_map
    kernel = kmap.kernel_of(node.name) if kmap else None
    return AccuracyReport(graph.graph_id, "mismatch", tol, tol, node.name, node.target,
                          graph.readable.lines.get(node.name), kernel.name if kernel else "",
                          graph.readable.sources.get(node.name),
                          **difference_fields(node.difference))
