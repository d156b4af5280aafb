"""Autocast's casts of frozen weights as constants.

Inside an enabled CPU autocast region, autocast casts every float32 tensor argument of its lower-precision ops
(linear, the convolutions, addmm, mm, matmul, bmm, baddbmm) to its dtype on each call. A frozen graph's weights are
constants, so those casts give the same values every call: `autocast_casts` makes each one a constant of its own,
computed once (and again when a parameter changes: compiler/graph_passes/freezing.py guards them like every fold). GPT-2's
Conv1D is `torch.addmm(bias, x, weight)`: its bf16 inference graph cast every weight per call (14 cast kernels,
4.0 ms of a 9 ms call) until addmm and the other products were covered here, not only Linear and convolutions.
"""
from __future__ import annotations

import operator

import torch
import torch.fx

from compiler.graph_passes.fx_calls import CONV, LINEAR, call_arg, set_constant_arg

# autocast's lower-precision ops that a Dynamo graph calls as functions, with their tensor arguments (position,
# keyword): autocast casts each float32 one
_CASTS_ARGS: dict = {
    **{op: ((0, "input"), (1, "weight"), (2, "bias")) for op in (*CONV, *LINEAR, torch.conv1d, torch.conv3d)},
    torch.addmm: ((0, "input"), (1, "mat1"), (2, "mat2")),
    torch.mm: ((0, "input"), (1, "mat2")),
    torch.bmm: ((0, "input"), (1, "mat2")),
    torch.baddbmm: ((0, "input"), (1, "batch1"), (2, "batch2")),
    torch.matmul: ((0, "input"), (1, "other")),
    operator.matmul: ((0, ""), (1, "")),
}


_HALF = (torch.bfloat16, torch.float16)


def autocast_regions(graph: torch.fx.Graph) -> dict[torch.fx.Node, torch.dtype | None]:
    """Each call node of a Dynamo graph -> the dtype CPU autocast computes its lower-precision ops in there (None:
    autocast off). The region is the ambient one (the graph was traced, and is called, inside `torch.autocast`:
    Dynamo guards on that state and leaves no marker in the graph) until the graph's own `_enter_autocast` /
    `_exit_autocast` markers change it."""
    ambient = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None
    dtype = ambient if ambient in _HALF else None
    entered: dict[torch.fx.Node, torch.dtype | None] = {}
    regions: dict[torch.fx.Node, torch.dtype | None] = {}
    for node in graph.nodes:
        name = getattr(node.target, "__name__", "") if node.op == "call_function" else ""
        if name == "_enter_autocast":
            device, kind, enabled = (list(node.args) + [None, None, True])[:3]
            entered[node] = dtype
            if device == "cpu":
                dtype = kind if enabled and kind in _HALF else None
        elif name == "_exit_autocast" and node.args and node.args[0] in entered:
            dtype = entered[node.args[0]]
        elif node.op in ("call_function", "call_method"):
            regions[node] = dtype
    return regions


def autocast_casts(graph: torch.fx.Graph, const: set[torch.fx.Node]) -> int:
    """Inside an enabled CPU autocast region (the graph's own, or the one it was traced and is called in), the
    constant float32 arguments of autocast's lower-precision ops (a Linear's or convolution's weight and bias, a
    folded BatchNorm's among them; addmm's, mm's and matmul's operands) cast to autocast's dtype once, as
    constants: autocast casts them on every call otherwise (to the same values; an argument already in its dtype is
    left as it is). Returns how many casts became constants."""
    changed = 0
    for node, dtype in autocast_regions(graph).items():
        if dtype is not None and node.op == "call_function" and node.target in _CASTS_ARGS:
            for index, arg in _CASTS_ARGS[node.target]:
                value = call_arg(node, index, arg, None) if arg or len(node.args) > index else None
                val = getattr(value, "meta", {}).get("example_value")
                if value not in const or not isinstance(val, torch.Tensor) or val.dtype != torch.float32:
                    continue
                with graph.inserting_before(node):
                    cast = graph.call_method("to", (value, dtype))
                set_constant_arg(node, index, arg, cast, const)
                changed += 1
    return changed
