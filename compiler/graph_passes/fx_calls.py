"""What the FX passes over Dynamo's graph ask of its call nodes: an argument by position or keyword, a constant put in
its place, the ops that are convolutions and Linear layers, and whether the graph changes a tensor in place."""
from __future__ import annotations

import operator

import torch
import torch.fx

CONV = {torch.conv2d, torch.nn.functional.conv2d}
LINEAR = {torch.nn.functional.linear, torch._C._nn.linear}
_IN_PLACE_OPERATORS = {
    operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
    operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift,
    operator.imatmul,
}


def call_arg(node: torch.fx.Node, index: int, name: str, default=None):
    """Argument `index` of a call node, or its keyword `name`."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def set_constant_arg(node: torch.fx.Node, index: int, name: str, value: torch.fx.Node, const: set) -> None:
    """`node` reads constant node `value` as its argument `index` (or keyword `name`)."""
    const.add(value)
    if len(node.args) > index:
        node.args = node.args[:index] + (value,) + node.args[index + 1:]
    else:
        node.kwargs = {**node.kwargs, name: value}


def mutates(gm: torch.fx.GraphModule) -> bool:
    """Whether Dynamo's graph changes a tensor in place (data or metadata: `add_`, `t_`, `x[i] = v`, `out=`)."""
    for n in gm.graph.nodes:
        if n.op == "call_method" and n.target.endswith("_") and not n.target.startswith("_"):
            return True
        if n.op == "call_function":
            name = getattr(n.target, "__name__", "")
            if getattr(n.target, "__module__", None) in ("_operator", "operator"):
                name = ""  # and_, or_, not_, is_: Python operators, in place only if in _IN_PLACE_OPERATORS
            if ((name.endswith("_") and not name.startswith("_")) or n.target in _IN_PLACE_OPERATORS
                    or "out" in n.kwargs):
                return True
        if n.op == "call_module":
            return True
    return False
