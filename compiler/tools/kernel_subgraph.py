"""One kernel as a piece of its FX graph: the values flowing into it from outside (its inputs), the values
it leaves for the rest of the graph (its outputs), and that piece as a standalone GraphModule."""
from __future__ import annotations

import ast
import os
import runpy
from dataclasses import dataclass

import torch
import torch.fx

from compiler import config
from compiler.tools.repro_compile import SymbolicGraph


@dataclass
class KernelBoundary:
    """Node names at a kernel's edge, in graph order (a kernel_map.json kernel cut out of its graph)."""

    kernel: str
    nodes: list[str]  # the kernel's nodes that are in the graph, in graph order
    inputs: list[str]  # nodes outside the kernel (placeholders or earlier nodes) it reads
    outputs: list[str]  # its nodes used outside it (or its last node when none is)


def kernel_boundary(gm: torch.fx.GraphModule, kernel: str, node_names: list[str]) -> KernelBoundary:
    inside = set(node_names)
    nodes = [n for n in gm.graph.nodes if n.name in inside and n.op == "call_function"]
    inputs: list[str] = []
    outputs: list[str] = []
    for n in nodes:
        for a in n.all_input_nodes:
            if a.name not in inside and a.name not in inputs:
                inputs.append(a.name)
        if any(u.name not in inside for u in n.users):
            outputs.append(n.name)
    if not outputs and nodes:
        outputs.append(nodes[-1].name)
    order = {n.name: i for i, n in enumerate(gm.graph.nodes)}
    inputs.sort(key=order.__getitem__)
    return KernelBoundary(kernel, [n.name for n in nodes], inputs, outputs)


def kernel_subgraph(gm: torch.fx.GraphModule, boundary: KernelBoundary) -> torch.fx.GraphModule:
    """A GraphModule whose placeholders are the kernel's inputs (same names) and whose output is the
    tuple of its outputs."""
    graph = torch.fx.Graph()
    env: dict[str, torch.fx.Node] = {}
    for name in boundary.inputs:
        env[name] = graph.placeholder(name)
    inside = set(boundary.nodes)
    for n in gm.graph.nodes:
        if n.name in inside:
            env[n.name] = graph.node_copy(n, lambda a: env[a.name])
    graph.output(tuple(env[name] for name in boundary.outputs))
    sub = torch.fx.GraphModule(torch.nn.Module(), graph)
    return sub


def load_named_graph(debug_dir: str) -> tuple[torch.fx.GraphModule, list]:
    """The graph and inputs of `fx_graph_runnable.py`, its nodes named as in kernel_map.json (tracing
    the script's `Repro` renames nodes after their ops; the script's variables are the original names).
    Runs the script's definitions, not its __main__ block; `config.cpp.op_overrides` is left as it was."""
    gm, inputs, _ = load_named_repro(debug_dir)
    return gm, inputs


def load_named_repro(debug_dir: str) -> tuple[torch.fx.GraphModule, list, SymbolicGraph]:
    """load_named_graph's graph and inputs, and which of its values are over size symbols (by node name)."""
    path = os.path.join(debug_dir, "fx_graph_runnable.py")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found: expected a lens debug directory (run_*/lens/graph_N)")
    with open(path) as f:
        text = f.read()
    old = dict(config.cpp.op_overrides)
    try:
        namespace = runpy.run_path(path, run_name="kernel_lens_repro")
    finally:
        config.cpp.op_overrides = old
    gm = torch.fx.symbolic_trace(namespace["Repro"]())
    names = forward_variables(text)
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    if len(names) == len(calls):
        for node, name in zip(calls, names):
            if node.name != name:
                node._rename(name)
        gm.recompile()
    inputs = list(namespace["load_args"]())
    return gm, inputs, SymbolicGraph.of(gm, inputs, namespace.get("SYMBOLIC_INPUTS"), namespace.get("SIZES"))


def forward_variables(text: str) -> list[str]:
    """The names assigned, in order, by `Repro.forward` in an fx_graph_runnable.py text (FX's
    `x = None` lines, which free values, are not nodes)."""
    for cls in ast.parse(text).body:
        if isinstance(cls, ast.ClassDef) and cls.name == "Repro":
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "forward":
                    return [s.targets[0].id for s in fn.body
                            if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)
                            and not (isinstance(s.value, ast.Constant) and s.value.value is None)]
    return []


def recorded_op_overrides(debug_dir: str) -> dict[str, str]:
    """The `compiler.config.cpp.op_overrides` an fx_graph_runnable.py records (empty when none was active)."""
    path = os.path.join(debug_dir, "fx_graph_runnable.py")
    with open(path) as f:
        tree = ast.parse(f.read())
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Attribute)
                and ast.unparse(stmt.targets[0]) == "compiler.config.cpp.op_overrides"):
            return dict(ast.literal_eval(stmt.value))
    return {}
