"""Frozen conv2d calls as oneDNN convolutions over a prepacked weight, with the activation after them fused.

In a frozen inference graph (compiler/graph_passes/freezing.py) each float32 conv2d of a 4-d input whose weight is a
constant becomes `torch.ops.lens.conv2d_onednn` (compiler/machine/conv_packed.py): the weight is reordered into
oneDNN's blocked format once rather than on every call, the activations are channels-last, and an activation that is
the convolution's only user (ReLU, hardswish, SiLU, GELU, sigmoid, tanh, ReLU6/hardtanh, leaky ReLU, hardsigmoid)
is applied by the convolution as it writes its output instead of as a separate pass. Inductor's freezing does the
same (its mkldnn fusion passes); this is where the conv nets' time was (docs/performance.md, issue 49).
"""
from __future__ import annotations

import operator

import torch
import torch.fx
import torch.nn.functional as F

from compiler.graph_passes.freezing_autocast import autocast_regions
from compiler.graph_passes.fx_calls import CONV, call_arg
from compiler.machine import conv_packed


def _flag(node, index, name, default):
    return call_arg(node, index, name, default)


# activation call -> (oneDNN's attr, its scalars, its algorithm), from the call node; None where it has no post-op
def _leaky(n):
    slope = _flag(n, 1, "negative_slope", 0.01)
    return ("leaky_relu", [slope], "") if isinstance(slope, (int, float)) else None


def _hardtanh(n):
    lo, hi = _flag(n, 1, "min_val", -1.0), _flag(n, 2, "max_val", 1.0)
    return ("hardtanh", [lo, hi], "") if all(isinstance(v, (int, float)) for v in (lo, hi)) else None


def _gelu(n):
    approximate = _flag(n, 1, "approximate", "none")
    return ("gelu", [], approximate) if approximate in ("none", "tanh") else None


_POST_OPS = {
    **{f: (lambda n: ("relu", [], "")) for f in (torch.relu, F.relu, "relu")},
    **{f: (lambda n: ("sigmoid", [], "")) for f in (torch.sigmoid, F.sigmoid, "sigmoid")},
    **{f: (lambda n: ("tanh", [], "")) for f in (torch.tanh, F.tanh, "tanh")},
    F.hardswish: lambda n: ("hardswish", [], ""),
    F.hardsigmoid: lambda n: ("hardsigmoid", [], ""),
    F.silu: lambda n: ("swish", [], ""),
    F.relu6: lambda n: ("hardtanh", [0.0, 6.0], ""),
    F.hardtanh: _hardtanh,
    F.leaky_relu: _leaky,
    F.gelu: _gelu,
}


def _post_op(node: torch.fx.Node | None):
    """(attr, scalars, algorithm) when `node` is an activation oneDNN can apply as the convolution writes."""
    if node is None or node.op not in ("call_function", "call_method"):
        return None
    if node.op == "call_method" and not isinstance(node.target, str):
        return None
    rule = _POST_OPS.get(node.target)
    return rule(node) if rule is not None else None


def activation_after(node: torch.fx.Node):
    """(its only reader, that reader's (attr, scalars, algorithm)) when `node`'s only reader is an activation of it
    oneDNN can apply as it writes (`_post_op`); (that reader or None, None) otherwise."""
    (user,) = node.users if len(node.users) == 1 else (None,)
    return user, _post_op(user) if user is not None and user.args and user.args[0] is node else None


def _pair(v) -> list[int] | None:
    if isinstance(v, int):
        return [v, v]
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(i, int) for i in v):
        return list(v)
    return None


def _string_padding(padding, weight, stride, dilation) -> list[int] | None:
    """`padding="valid"` or `"same"` as the explicit padding it is: "same" (stride 1 only) pads each side by half of
    dilation * (kernel - 1) where that is even; where it is odd ATen pads one more on the far side, which an explicit
    padding cannot say (None: such a convolution is left to ATen)."""
    w = example(weight)
    while w is None and isinstance(weight, torch.fx.Node) and weight.args and \
            getattr(weight.target, "__name__", weight.target) in ("channels_last", "contiguous", "to"):
        weight = weight.args[0]  # (freezing's relayout of the weight, or a cast: its source's shape)
        w = example(weight)
    if padding == "valid":
        return [0, 0]
    if padding != "same" or w is None or w.dim() != 4 or stride != [1, 1] or dilation is None:
        return None
    total = [d * (k - 1) for d, k in zip(dilation, w.shape[2:])]
    return None if any(t % 2 for t in total) else [t // 2 for t in total]


def example(node) -> torch.Tensor | None:
    value = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
    return value if isinstance(value, torch.Tensor) else None


def _dtype_here(region: torch.dtype | None) -> torch.dtype | None:
    """The dtype a convolution computes in under autocast region `region` when oneDNN can take it: float32 outside
    autocast, bfloat16 in a bfloat16 region where the CPU has bf16 instructions; None: left to ATen."""
    if region is None:
        return torch.float32
    if region == torch.bfloat16 and torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return torch.bfloat16
    return None


def conv_onednn(graph: torch.fx.Graph, const: set[torch.fx.Node]) -> int:
    """Each conv2d with a constant weight and a float32 4-d CPU input as lens.conv2d_onednn (an activation that is
    its only user fused); returns how many convolutions. Inside a bfloat16 autocast region (compiler/graph_passes/
    freezing_autocast.py has cast the weight and bias to constants of that dtype) the input is cast as autocast
    casts it, and the convolution computes in bfloat16 as autocast's would."""
    if not conv_packed.available():
        return 0
    regions = autocast_regions(graph)
    changed = 0
    for conv in list(graph.nodes):
        if conv.op != "call_function" or conv.target not in CONV:
            continue
        dtype = _dtype_here(regions.get(conv))
        x, weight, bias = conv.args[0], call_arg(conv, 1, "weight"), call_arg(conv, 2, "bias")
        geometry = [_pair(call_arg(conv, i, n, d)) for i, n, d in ((4, "padding", 0), (3, "stride", 1),
                                                                   (5, "dilation", 1))]
        geometry[0] = geometry[0] or _string_padding(call_arg(conv, 4, "padding", 0), weight, *geometry[1:])
        groups = call_arg(conv, 6, "groups", 1)
        val, out = example(x), example(conv)  # (the output's dtype is the one the weight was cast to)
        if (dtype is None or weight not in const or (bias is not None and bias not in const) or None in geometry
                or not isinstance(groups, int) or val is None or val.dim() != 4 or not val.is_floating_point()
                or (dtype == torch.float32 and val.dtype != dtype) or val.device.type != "cpu" or out is None
                or out.dtype != dtype):
            continue  # (an asymmetric "same" padding: left to ATen)

        fuse_call(graph, conv, x, dtype, conv_packed.CONV2D_ONEDNN, (weight, bias, *geometry, groups))
        changed += 1
    return changed


def fuse_call(graph: torch.fx.Graph, node: torch.fx.Node, x: torch.fx.Node, dtype: torch.dtype, target,
              arguments: tuple) -> None:
    """Replaces call `node` (a product or convolution of input `x` computing in `dtype`), and the activation after it
    where that is its only reader and oneDNN applies it (`activation_after`; not one autocast runs in float32), by
    one call of `target` on `(x, *arguments, attr, scalars, algorithm)`; `x` is first cast to `dtype` where it is of
    another, as autocast casts it (a node on the call's source line)."""
    val, out = example(x), example(node)
    user, post = activation_after(node)
    if post and example(user) is not None and example(user).dtype != dtype:
        post = None
    attr, scalars, algorithm = post or ("none", [], "")
    with graph.inserting_before(node):
        if val.dtype != dtype:
            x = graph.call_method("to", (x, dtype))
            x.meta["example_value"] = out.new_empty(val.shape)
            x.meta["stack_trace"] = node.meta.get("stack_trace")
        fused = graph.call_function(target, (x, *arguments, attr, scalars, algorithm))
    last = user if post else node
    fused_meta(fused, last, node)
    last.replace_all_uses_with(fused)
    if post:
        graph.erase_node(user)
    graph.erase_node(node)


def fused_meta(fused: torch.fx.Node, last: torch.fx.Node, conv: torch.fx.Node) -> None:
    """The fused call's meta: the value of `last`, the node it replaces (its output), and the convolution's source
    line (`stack_trace`): the call is the convolution's, which is where its kernel and why-record belong when its
    activation or sum is a later statement (`y = self.conv(x)` then `y = F.relu(y)`)."""
    fused.meta.update(last.meta)
    if conv.meta.get("stack_trace"):
        fused.meta["stack_trace"] = conv.meta["stack_trace"]


_ADDS = {operator.add, torch.add, "add"}
_IN_PLACE_ADDS = {operator.iadd, "add_"}  # (their first argument is changed: only the convolution's own output may be)


def constant_meta(node) -> tuple[torch.dtype, int] | None:
    """(dtype, dims) of a constant node: its traced value's, or for autocast's cast of it made a constant
    (freezing_autocast.py, a node no trace has seen) its source's dims in the cast's dtype."""
    val = example(node)
    if val is not None:
        return val.dtype, val.dim()
    if isinstance(node, torch.fx.Node) and node.op == "call_method" and node.target == "to" and len(node.args) == 2 \
            and isinstance(node.args[1], torch.dtype) and example(node.args[0]) is not None:
        return node.args[1], example(node.args[0]).dim()
    return None


def _sums_in_one_pass(conv: torch.fx.Node, dtype: torch.dtype) -> bool:
    """Whether oneDNN adds a residual to this convolution's accumulator before rounding to `dtype`: always in
    float32; in bfloat16 for an ungrouped convolution whose bias is bfloat16 or absent (ATen's binary op refuses a
    float32 bias, and rounds a grouped convolution's output before the sum: no pass saved)."""
    if dtype == torch.float32:
        return True
    bias = conv.args[2]
    return dtype == torch.bfloat16 and conv.args[6] == 1 and (bias is None or constant_meta(bias) == (dtype, 1))


def _residual_add(conv: torch.fx.Node) -> tuple[torch.fx.Node, torch.fx.Node] | None:
    """(the add, its other operand) when the unfused float32 or bfloat16 convolution `conv` is read only by an add of
    a tensor of its own shape and dtype (a residual block's sum: no broadcast, no alpha), else None."""
    if len(conv.users) != 1 or conv.args[7] != "none":
        return None
    (add,) = conv.users
    if add.op not in ("call_function", "call_method") or add.target not in _ADDS | _IN_PLACE_ADDS \
            or len(add.args) != 2 or add.kwargs or add.args[0] is add.args[1]:
        return None
    if add.target in _IN_PLACE_ADDS and add.args[0] is not conv:
        return None  # (`shortcut += conv(x)` changes the shortcut, which others may read)
    other = add.args[1] if add.args[0] is conv else add.args[0]
    out, val, total = example(conv), example(other), example(add)
    if not isinstance(other, torch.fx.Node) or out is None or val is None or total is None:
        return None
    if not (out.dtype == val.dtype == total.dtype and out.shape == val.shape == total.shape
            and _sums_in_one_pass(conv, out.dtype)):
        return None
    return add, other


def conv_onednn_adds(graph: torch.fx.Graph) -> int:
    """Each `lens.conv2d_onednn` without an activation whose only reader adds a residual of its shape, as one
    `lens.conv2d_onednn_add` (the sum as oneDNN's binary post-op, the ReLU after it too where that is the sum's only
    reader); returns how many. In float32 the sum is the separate convolution and add's bit for bit (one float32
    accumulator plus the residual); in bfloat16 (autocast) the residual is added to the float32 accumulator before
    the one rounding, where eager rounds the convolution's output first: within a rounding of eager's, as Inductor's
    fused bfloat16 sum."""
    changed = 0
    for conv in list(graph.nodes):
        if conv.op != "call_function" or conv.target is not conv_packed.CONV2D_ONEDNN:
            continue
        found = _residual_add(conv)
        if found is None:
            continue
        add, other = found
        user, post = activation_after(add)
        attr = post[0] if post and post[0] in conv_packed.ADD_POST_OPS else "none"
        last = user if attr != "none" else add
        x, weight, bias, padding, stride, dilation, groups = conv.args[:7]
        with graph.inserting_before(last):
            fused = graph.call_function(conv_packed.CONV2D_ONEDNN_ADD, (x, other, weight, bias, padding, stride,
                                                                       dilation, groups, attr))
        fused_meta(fused, last, conv)
        last.replace_all_uses_with(fused)
        for node in ([user] if attr != "none" else []) + [add, conv]:
            graph.erase_node(node)
        changed += 1
    return changed
