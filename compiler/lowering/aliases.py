"""Which FX nodes share memory: a view's result is its input's memory (the op's schema says its return aliases an
argument); `getitem` of a view op's tuple (split, unbind) too. Used where outputs must not share memory they should
not (graph.py's outputs) and where a node an output holds must stay (cse.py)."""
from __future__ import annotations

import operator

import torch
import torch.fx

from compiler.lowering.values import origin_scope


def is_view(node: torch.fx.Node) -> bool:
    """Whether `node`'s result is (part of) its first argument's memory."""
    target = node.target
    if target is operator.getitem:
        base = node.args[0]
        return isinstance(base, torch.fx.Node) and is_view(base)
    return isinstance(target, torch._ops.OpOverload) and any(r.alias_info is not None for r in target._schema.returns)


def storage_owner(node: torch.fx.Node) -> torch.fx.Node:
    """The node whose memory `node`'s result is: itself, or what the chain of views it ends lies on."""
    while node.op == "call_function" and is_view(node) and isinstance(node.args[0], torch.fx.Node):
        node = node.args[0]
    return node


def view_chain(node: torch.fx.Node, owner: torch.fx.Node) -> list[torch.fx.Node]:
    """The views from `owner` (excluded) to `node` (included), in the order they compute."""
    chain = []
    while node is not owner:
        chain.append(node)
        node = node.args[0]
    return chain[::-1]


def share_owners(lowering, outputs: list) -> None:
    """Outputs that are views of one lazily computed node share its memory in eager (writing one changes the other):
    that node is realized once and each such output's views lowered again over the buffer, so the outputs view one
    buffer instead of each computing its own (`lowering`: compiler/lowering/graph.py's GraphLowering)."""
    by_owner: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for arg in outputs:
        if isinstance(arg, torch.fx.Node) and arg not in by_owner.get(storage_owner(arg), []):
            by_owner.setdefault(storage_owner(arg), []).append(arg)
    for owner, nodes in by_owner.items():
        value = lowering.env.get(owner)
        if len(nodes) < 2 or owner.op == "placeholder" or getattr(value, "strided", True) is not None:
            continue
        lowering.env[owner] = lowering.realize(value, stride=lowering._layout_of(owner, value), origin=owner.name)
        for node in nodes:
            for view in view_chain(node, owner):
                with origin_scope(view.name):
                    lowering.env[view] = lowering._call(view)
