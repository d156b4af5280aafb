"""`kernel-lens minify DEBUG_DIR`: shrinks a failing graph (compile error, accuracy mismatch or
exception) with four strategies — truncate suffix, delta debugging, dead-code elimination, remove
unused inputs — and writes `repro.py` (+ its inputs) that reproduces the failure standalone."""
from __future__ import annotations

import copy
import os
import runpy
from dataclasses import dataclass
from typing import Callable

import torch
import torch.fx

from compiler.debug.compile_error import LensCompileError
from compiler.tools.accuracy import DEFAULT_TOL, clone_args, compare
from compiler.tools.repro_compile import SymbolicGraph

Candidate = tuple[torch.fx.GraphModule, list]


@dataclass
class Failure:
    kind: str  # compile_error | accuracy | exception | invalid
    message: str

    def describe(self) -> str:
        """"a C++ compile error (...)": the failure as a noun phrase for repro.py's header."""
        return f"{FAILURE_NOUNS.get(self.kind, self.kind)} ({self.message})"


FAILURE_NOUNS = {"compile_error": "a C++ compile error", "accuracy": "an accuracy mismatch",
                 "exception": "an exception", "invalid": "an eager failure"}


class NothingToMinify(Exception):
    """The graph in the debug directory does not fail: there is nothing to shrink."""


def load_repro(debug_dir: str) -> tuple[torch.fx.GraphModule, list, SymbolicGraph]:
    """The graph and inputs of `fx_graph_runnable.py` in a debug directory, and which of its values are over
    size symbols (this runs that script's definitions, as the user would; its __main__ block is not run)."""
    path = os.path.join(debug_dir, "fx_graph_runnable.py")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found: minify needs a lens debug directory (run_*/lens/graph_N)")
    namespace = runpy.run_path(path, run_name="kernel_lens_repro")
    gm = torch.fx.symbolic_trace(namespace["Repro"]())
    inputs = list(namespace["load_args"]())
    return gm, inputs, SymbolicGraph.of(gm, inputs, namespace.get("SYMBOLIC_INPUTS"), namespace.get("SIZES"))


def node_count(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "call_function")


def input_count(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "placeholder")


def failure_of(gm: torch.fx.GraphModule, inputs: list, compile_fn: Callable, tol: float = DEFAULT_TOL
               ) -> Failure | None:
    """How compiling and running `gm` with lens fails (None when it matches eager)."""
    try:
        expected = gm(*clone_args(inputs))
    except Exception as e:  # an invalid candidate: eager itself fails
        return Failure("invalid", f"{type(e).__name__}: {e}")
    try:
        compiled = compile_fn(copy.deepcopy(gm), clone_args(inputs))
        got = compiled(clone_args(inputs))
    except LensCompileError as e:
        return Failure("compile_error", str(e).splitlines()[0])
    except Exception as e:
        return Failure("exception", f"{type(e).__name__}: {e}")
    exp = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    d = compare(exp, list(got), tol)
    return Failure("accuracy", f"max abs error {d.max_abs_error:.6g}") if d else None


def _eager_values(gm: torch.fx.GraphModule, inputs: list) -> dict[str, object]:
    values: dict[str, object] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            values[n.name] = out
            return out

    Recorder(gm).run(*clone_args(inputs))
    return values


def _rebuild(gm: torch.fx.GraphModule, inputs: list, keep: Callable[[torch.fx.Node], str],
             values: dict[str, object]) -> Candidate:
    """A copy where each call_function node is kept ("keep"), dropped ("drop") or turned into a new
    input ("input", fed its eager value); outputs become the kept nodes nobody else uses."""
    graph = torch.fx.Graph()
    env: dict[str, torch.fx.Node] = {}
    new_inputs: list = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for ph, value in zip(placeholders, inputs):
        env[ph.name] = graph.placeholder(ph.name)
        new_inputs.append(value)
    kept = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        decision = keep(n)
        if decision == "drop":
            continue
        if decision == "input" or any(a.name not in env for a in n.all_input_nodes):
            if not isinstance(values.get(n.name), torch.Tensor):
                continue
            env[n.name] = graph.placeholder(f"{n.name}_in")
            new_inputs.append(values[n.name])
            continue
        env[n.name] = graph.node_copy(n, lambda a: env[a.name])
        kept.append(env[n.name])
    leaves = [n for n in kept if not n.users and isinstance(values.get(n.name), torch.Tensor)]
    graph.output(tuple(leaves))
    new = torch.fx.GraphModule(gm, graph)
    return _remove_unused_inputs(new, new_inputs)


def _remove_unused_inputs(gm: torch.fx.GraphModule, inputs: list) -> Candidate:
    keep_inputs = []
    for n, value in zip([n for n in gm.graph.nodes if n.op == "placeholder"], inputs):
        if n.users:
            keep_inputs.append(value)
        else:
            gm.graph.erase_node(n)
    gm.recompile()
    return gm, keep_inputs


def minify(gm: torch.fx.GraphModule, inputs: list, compile_fn: Callable, log: Callable[[str], None] = print,
           tol: float = DEFAULT_TOL) -> tuple[Candidate, Failure]:
    original = failure_of(gm, inputs, compile_fn, tol)
    if original is None or original.kind == "invalid":
        raise NothingToMinify("the graph compiles and matches eager: nothing to minify")
    log(f"Started off with {node_count(gm)} nodes ({original.kind}: {original.message})")
    values = _eager_values(gm, inputs)

    def fails(c: Candidate) -> bool:
        if node_count(c[0]) == 0:
            return False
        f = failure_of(c[0], c[1], compile_fn, tol)
        return f is not None and f.kind == original.kind

    best: Candidate = (gm, inputs)
    start = node_count(gm)
    improved = True
    while improved:
        improved = False
        for name, strategy in STRATEGIES:
            before = node_count(best[0]), input_count(best[0])
            log(f"Strategy: {name} ({before[0]} nodes, {before[1]} inputs)")
            result = strategy(best, values, fails)
            if result is not None and (node_count(result[0]), input_count(result[0])) < before:
                log(f"SUCCESS: {name}: went from {before[0]} to {node_count(result[0])} nodes")
                best, improved = result, True
    log(f"Made it down to {node_count(best[0])} nodes (from {start})")
    own = failure_of(best[0], best[1], compile_fn, tol)  # repro.py's header gives its own error, not the graph's
    return best, own if own is not None and own.kind == original.kind else original


def _truncate_suffix(best: Candidate, values, fails) -> Candidate | None:
    gm, inputs = best
    order = [n.name for n in gm.graph.nodes if n.op == "call_function"]
    lo, hi, found = 1, len(order) - 1, None
    while lo <= hi:  # the shortest prefix that still fails
        mid = (lo + hi) // 2
        prefix = set(order[:mid])
        cand = _rebuild(gm, inputs, lambda n: "keep" if n.name in prefix else "drop", values)
        if fails(cand):
            found, hi = cand, mid - 1
        else:
            lo = mid + 1
    return found


def _delta_debugging(best: Candidate, values, fails) -> Candidate | None:
    gm, inputs = best
    order = [n.name for n in gm.graph.nodes if n.op == "call_function"]
    granularity = max(1, len(order) // 2)
    improved = None
    while granularity >= 1:
        for i in range(0, len(order), granularity):
            chunk = set(order[i:i + granularity])
            cand = _rebuild(gm, inputs, lambda n: "input" if n.name in chunk else "keep", values)
            if node_count(cand[0]) < node_count(gm) and fails(cand):
                gm, inputs = cand
                improved = cand
                order = [n.name for n in gm.graph.nodes if n.op == "call_function"]
        granularity //= 2
    return improved


def _eliminate_dead_code(best: Candidate, values, fails) -> Candidate | None:
    gm = copy.deepcopy(best[0])
    if gm.graph.eliminate_dead_code():
        gm.recompile()
        cand = (gm, best[1])
        return cand if fails(cand) else None
    return None


def _remove_unused(best: Candidate, values, fails) -> Candidate | None:
    cand = _remove_unused_inputs(copy.deepcopy(best[0]), list(best[1]))
    return cand if input_count(cand[0]) < input_count(best[0]) and fails(cand) else None


STRATEGIES = [
    ("Truncate suffix", _truncate_suffix),
    ("Delta debugging", _delta_debugging),
    ("Eliminate dead code", _eliminate_dead_code),
    ("Remove unused inputs", _remove_unused),
]


def write_repro(debug_dir: str, candidate: Candidate, failure: Failure, symbols: SymbolicGraph | None = None) -> str:
    """`repro.py` + `repro_inputs.pt` beside the debug files; running it reproduces the failure (over the size
    symbols of the graph it was cut from, `symbols`)."""
    from compiler.debug.repro_code import runnable_graph_code
    gm, inputs = candidate
    torch.save(inputs, os.path.join(debug_dir, "repro_inputs.pt"))
    path = os.path.abspath(os.path.join(debug_dir, "repro.py"))
    title = f"Minified repro of {failure.describe()}; written by kernel-lens minify"
    text = runnable_graph_code(gm, (symbols or SymbolicGraph()).repro_inputs(gm, inputs), title,
                               tensors_file="repro_inputs.pt", run_path=path)
    with open(path, "w") as f:
        f.write(text)
    return path
