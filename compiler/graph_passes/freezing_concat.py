"""Linear layers that read the same input with frozen weights (an attention's query, key and value projections) as
one product over their concatenated weights, each layer's output a column slice of it (compiler/graph_passes/freezing.py).

One (128,768)x(768,2304) product instead of three (128,768)x(768,768) ones reads the input once and runs one MKL
call with three times the columns: 2.20 -> 1.79 ms from packed weights (gemm_packed.py), 2.42 -> 1.99 in ATen's mm;
whole models, same process, merged / apart: BERT 0.98, DistilBERT 0.95, ViT 0.92 (2 threads of the AMX Xeon).
Weights under `MIN_WEIGHT` elements stay apart.
The slices are views (`narrow` on the last dimension), so what read each layer's output reads the same values at a
row stride of the concatenated width; a graph whose later ops cannot take such a view (a `view` merging the last
dimension with another) is found by tracing the rewritten graph with fake tensors, and is frozen without it.
"""
from __future__ import annotations

import logging
from typing import Sequence

import torch
import torch.fx

log = logging.getLogger(__name__)

# Smaller weights stay apart: MobileBERT's (128, 512) bottleneck pairs ran 1.04x slower merged (MKL threads small
# products well already), BERT's (768, 768) projections 0.98x, DistilBERT's 0.95x, ViT's 0.92x (whole models).
MIN_WEIGHT = 1 << 18
_LINEAR = {torch.nn.functional.linear, torch._C._nn.linear}


def _value(node) -> torch.Tensor | None:
    val = getattr(node, "meta", {}).get("example_value")
    return val if isinstance(val, torch.Tensor) else None


def _groups(graph: torch.fx.Graph, const: set) -> list[list[torch.fx.Node]]:
    """Linear calls with a constant float32 2-D weight (and a constant bias, all or none), grouped by input."""
    by_input: dict[tuple, list[torch.fx.Node]] = {}
    for node in graph.nodes:
        if node.op != "call_function" or node.target not in _LINEAR or node.kwargs:
            continue
        x, weight, bias = (list(node.args) + [None, None])[:3]
        w = _value(weight)
        if (not isinstance(x, torch.fx.Node) or x in const or weight not in const or w is None or w.dim() != 2
                or w.dtype != torch.float32 or w.numel() < MIN_WEIGHT or (bias is not None and bias not in const)):
            continue
        by_input.setdefault((x, bias is None, w.shape[1]), []).append(node)
    return [g for g in by_input.values() if len(g) > 1]


def concat_linears(graph: torch.fx.Graph, const: set) -> int:
    """Each group of Linear calls on one input as one Linear over the concatenated weights (and biases), each
    call's output its column slice; the concatenations are constants. Returns how many calls were merged."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    merged = 0
    for group in _groups(graph, const):
        first = min(group, key=order.__getitem__)
        operands = [a for n in group for a in n.args[1:3] if a is not None]
        if any(order[a] > order[first] for a in operands):
            continue  # (a weight computed after the first call: keep the group as it is)
        with graph.inserting_before(first):
            weight = graph.call_function(torch.cat, ([n.args[1] for n in group], 0))
            biases = [n.args[2] for n in group] if len(group[0].args) > 2 and group[0].args[2] is not None else None
            bias = graph.call_function(torch.cat, (biases, 0)) if biases else None
            product = graph.call_function(torch.nn.functional.linear, (group[0].args[0], weight, bias))
        const.update(n for n in (weight, bias) if n is not None)
        start, parts = 0, []
        with graph.inserting_before(first):
            for node in group:
                width = _value(node.args[1]).shape[0]
                parts.append(graph.call_function(torch.narrow, (product, -1, start, width)))
                start += width
        for node, part in zip(group, parts):
            node.replace_all_uses_with(part)
            graph.erase_node(node)
        merged += len(group)
    return merged


def traces(owner: torch.nn.Module, graph: torch.fx.Graph, example_inputs: Sequence,
           otherwise: str = "Linear layers sharing an input kept apart") -> bool:
    """Whether `graph` runs on fake copies of `example_inputs` (shapes, strides and views checked, nothing computed);
    `otherwise`: what the debug log says is done instead when it does not."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp
    try:
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        fakes = [mode.from_tensor(t, static_shapes=True) if isinstance(t, torch.Tensor) else t for t in example_inputs]
        FakeTensorProp(torch.fx.GraphModule(owner, graph), mode).propagate_dont_convert_inputs(*fakes)
        return True
    except Exception as e:  # noqa: BLE001 (any failure: the graph is frozen without the rewrite)
        log.debug("kernel-lens: %s: %s", otherwise, e)
        return False
