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


def changes_in_place(n: torch.fx.Node) -> bool:
    """Whether a node of Dynamo's graph changes a tensor in place (data or metadata: `add_`, `t_`, `x[i] = v`, `out=`)."""
    if n.op == "call_method" and n.target.endswith("_") and not n.target.startswith("_"):
        return True
    if n.op == "call_function":
        name = getattr(n.target, "__name__", "")
        if getattr(n.target, "__module__", None) in ("_operator", "operator"):
            name = ""  # and_, or_, not_, is_: Python operators, in place only if in _IN_PLACE_OPERATORS
        if ((name.endswith("_") and not name.startswith("_")) or n.target in _IN_PLACE_OPERATORS
                or "out" in n.kwargs):
            return True
    return n.op == "call_module"


def mutates(gm: torch.fx.GraphModule) -> bool:
    """Whether Dynamo's graph changes a tensor in place (data or metadata: `add_`, `t_`, `x[i] = v`, `out=`)."""
    return any(changes_in_place(n) for n in gm.graph.nodes)


F = torch.nn.functional
# calls whose result may share its first argument's memory: a change through the result changes the argument
_VIEW_METHODS = {"view", "reshape", "transpose", "permute", "flatten", "squeeze", "unsqueeze", "expand", "expand_as",
                 "view_as", "reshape_as", "narrow", "split", "chunk", "t", "contiguous", "detach", "to", "type",
                 "float", "double", "half", "bfloat16", "select", "unflatten", "as_strided", "unbind", "movedim",
                 "__getitem__"}
_VIEW_FUNCTIONS = {operator.getitem, torch.flatten, torch.reshape, torch.transpose, torch.permute, torch.squeeze,
                   torch.unsqueeze, torch.narrow, torch.split, torch.chunk, torch.t, torch.select, torch.unbind,
                   torch.movedim}
# calls whose result is a tensor of its own (never a view of an argument)
_FRESH_FUNCTIONS = {operator.add, operator.sub, operator.mul, operator.truediv, operator.neg, operator.matmul,
                    torch.add, torch.sub, torch.mul, torch.div, torch.cat, torch.stack, torch.matmul, torch.relu,
                    torch.sigmoid, torch.tanh, *CONV, *LINEAR, F.batch_norm, F.layer_norm, F.group_norm, F.relu,
                    F.gelu, F.silu, F.hardswish, F.hardsigmoid, F.relu6, F.sigmoid, F.adaptive_avg_pool2d,
                    F.avg_pool2d, F.max_pool2d, F.interpolate}
_FRESH_METHODS = {"add", "sub", "mul", "div", "matmul", "relu", "sigmoid", "tanh", "mean", "sum", "softmax", "clone"}


def _changed_root(node: torch.fx.Node) -> torch.fx.Node:
    """The node whose tensor a change through `node` lands in: back through views and earlier in-place changes."""
    while True:
        follow = changes_in_place(node) or (node.op == "call_method" and node.target in _VIEW_METHODS) or (
            node.op == "call_function" and node.target in _VIEW_FUNCTIONS)
        first = node.args[0] if node.args else None
        if not follow or not isinstance(first, torch.fx.Node) or node.op == "call_module":
            return node
        node = first


def _fresh(node: torch.fx.Node) -> bool:
    if changes_in_place(node):
        return False
    return (node.op == "call_function" and node.target in _FRESH_FUNCTIONS) or (
        node.op == "call_method" and node.target in _FRESH_METHODS)


def changes_only_fresh_tensors(graph: torch.fx.Graph, keep: set[torch.fx.Node]) -> bool:
    """Whether every in-place change of the graph lands in a tensor the graph itself computed (the residual
    `x += shortcut` of GhostNet's blocks, on a concatenation's slice): never in an input, a parameter, a view of one,
    a tensor of `keep` (constants computed once) or a tensor of unknown origin."""
    for n in graph.nodes:
        if not changes_in_place(n):
            continue
        root = _changed_root(n)
        if n.op == "call_module" or root is n or root.op == "placeholder" or root in keep or not _fresh(root):
            return False
    return True
