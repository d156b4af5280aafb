"""Channels-last convolutions in training graphs, chosen before AOTAutograd traces them.

oneDNN's convolutions run fastest with channels-last activations and weights (NHWC): given NCHW it reorders its
input, weight and output around each call, forward and backward. Inference graphs get channels-last weights from
freezing (compiler/graph_passes/freezing.py), whose constants are converted once; a training graph's weights are parameters
that change every step, so there the layout is chosen in Dynamo's graph: each 2-d convolution of a batched input
computing in bfloat16/float16 (autocast's, or a half model's) reads its input and weight channels-last
(`conv_channels_last`). float32 convolutions keep eager's layouts: channels-last gained them nothing on the zoo's
conv net (measured, with the weight gradients' conversions back fused too). AOTAutograd then traces the
whole step with that layout, so batch norm, ReLU and the residual adds between convolutions (lowering keeps their
input's layout), the saved activations and the backward's gradients are channels-last too, with the conversions
fused into the kernels before them (an autocast weight cast converts as it casts). The graph's outputs keep eager's
layout.

Measured (the zoo's conv net, training step, one process, 2 cores): see docs/performance.md.
"""
from __future__ import annotations

import torch
import torch.fx

from compiler import config

_HALF = (torch.bfloat16, torch.float16)


class _ChannelsLastWeight(torch.autograd.Function):
    """`weight.contiguous(memory_format=torch.channels_last)` whose gradient returns in the weight's own layout.
    The plain conversion's gradient stays channels-last, and where the parameter is contiguous AccumulateGrad then
    copies it into the parameter's layout outside the compiled graph: with `zero_grad(set_to_none=True)` 0.45 ms of
    the zoo conv net's 7.8 ms bf16 training step. Converted in the backward graph, the copy fuses into the kernel
    that casts the gradient to the parameter's dtype."""

    @staticmethod
    def forward(ctx, weight):
        ctx.was_contiguous = weight.is_contiguous()
        return weight.contiguous(memory_format=torch.channels_last)

    @staticmethod
    def backward(ctx, grad):
        return grad.contiguous() if ctx.was_contiguous else grad


def conv2d_channels_last(x, weight, *args, **kwargs):
    """torch.conv2d with its input and weight read channels-last (a no-op where they already are); the weight's
    gradient comes back in the weight's layout."""
    return torch.conv2d(x.contiguous(memory_format=torch.channels_last), _ChannelsLastWeight.apply(weight),
                        *args, **kwargs)


def _example(node) -> torch.Tensor | None:
    value = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
    return value if isinstance(value, torch.Tensor) else None


def has_backward(example_inputs) -> bool:
    """Whether a graph compiled with these inputs gets a backward: grad mode on and an input requiring grad."""
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs)


def conv_channels_last(gm: torch.fx.GraphModule, example_inputs) -> int:
    """In a training graph, every conv2d of a batched (4-d) input with a bfloat16/float16 output runs channels-last
    (in place); the graph's 4-d outputs that eager returns contiguous are made contiguous again. Returns how many
    convolutions changed."""
    if not config.train_conv_channels_last or not has_backward(example_inputs):
        return 0
    changed = 0
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.conv2d:
            x, out = _example(node.args[0]) if node.args else None, _example(node)
            if x is not None and out is not None and x.dim() == 4 and out.dtype in _HALF and not x.is_mkldnn \
                    and x.device.type == "cpu":
                node.target, changed = conv2d_channels_last, changed + 1
    if changed:
        _keep_output_layouts(gm)
        gm.recompile()
    return changed


def _keep_output_layouts(gm: torch.fx.GraphModule) -> None:
    """Each 4-d output that eager computes contiguous goes through `.contiguous()` (free where it already is)."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")

    def keep(value):
        example = _example(value)
        if example is None or example.dim() != 4 or not example.is_contiguous():
            return value
        with gm.graph.inserting_before(output):
            node = gm.graph.call_method("contiguous", (value,))
        node.meta.update(value.meta)
        return node
    output.args = torch.fx.node.map_arg(output.args, keep)
