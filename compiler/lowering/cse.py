"""Nodes that compute what an earlier node already computed, folded into it before lowering.

Autocast casts an input once per product that reads it: a layer norm's float32 output feeding a transformer's Q, K
and V products is cast to bfloat16 three times, three identical nodes (AOTAutograd folds such nodes in training's
joint graph, not in inference graphs). Lowering each would generate (or call) the same thing again. A node folds
into an earlier one with the same op and the same arguments: the same nodes, and constants equal in type and value
(-0.0 is not 0.0, True is not 1). Only ops without side effects fold (no mutation, no randomness), and never a node
whose memory an output holds. The pipeline makes each fold a why-record on the folded node (`reused`), so the editor can
say where its value comes from."""
from __future__ import annotations

import operator

import torch
import torch.fx

from compiler.lowering.aliases import is_view

_NOT_PURE_TAGS = (torch.Tag.nondeterministic_seeded, torch.Tag.nondeterministic_bitwise)


def _pure(node: torch.fx.Node) -> bool:
    if node.op != "call_function":
        return False
    target = node.target
    if target is operator.getitem:
        return True
    if not isinstance(target, torch._ops.OpOverload):
        return False
    # (a view folds too: both read the same memory)
    return not target._schema.is_mutable and not any(tag in _NOT_PURE_TAGS for tag in target.tags)


def _key(value):
    """A hashable key equal for two arguments only where they are the same: nodes by identity, constants by type and
    value (floats by their text, so -0.0 and 0.0 and NaN's differ as eager would see them)."""
    if isinstance(value, torch.fx.Node):
        return ("node", value)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((k, _key(v)) for k, v in value.items())))
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, (bool, int, str, type(None), torch.dtype, torch.device, torch.layout,
                          torch.memory_format)):
        return (type(value).__name__, value)
    raise TypeError(f"no key for {type(value).__name__}")


def _escaping(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """The nodes whose memory the graph's outputs hold: the outputs, and what each view among them views. Such a node
    never folds: two outputs would become one tensor (or views of one), and writing one would change the other."""
    stack = [a for n in gm.graph.nodes if n.op == "output" for a in n.all_input_nodes]
    found: set[torch.fx.Node] = set()
    while stack:
        node = stack.pop()
        if node in found:
            continue
        found.add(node)
        if node.target is operator.getitem or is_view(node):  # (a tuple's item is the op's result memory)
            stack.extend(node.all_input_nodes)
    return found


def fold_duplicates(gm: torch.fx.GraphModule) -> dict[str, str]:
    """Fold every pure node computing what an earlier one does into it (in place); {folded node: the node kept}."""
    seen: dict[tuple, torch.fx.Node] = {}
    folded: dict[str, str] = {}
    escaping = _escaping(gm)
    for node in list(gm.graph.nodes):
        if not _pure(node) or node in escaping:
            continue
        try:
            key = (node.target, _key(node.args), _key(node.kwargs))
        except TypeError:  # (an argument we cannot compare: never folded)
            continue
        first = seen.setdefault(key, node)
        if first is node:
            continue
        node.replace_all_uses_with(first)
        gm.graph.erase_node(node)
        folded[node.name] = first.name
    if folded:
        gm.recompile()
    return folded
