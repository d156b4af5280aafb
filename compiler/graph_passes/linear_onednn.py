"""Frozen bfloat16 Linear layers as one oneDNN call with the activation after them fused.

In a frozen inference graph (compiler/graph_passes/freezing.py), inside a bfloat16 autocast region whose products
oneDNN computes in bfloat16 from a frozen weight's blocked copy (machine/gemm_half.py `packs_weights`),
each Linear whose weight (and bias) are constants becomes `torch.ops.lens.linear_onednn` (machine/linear_packed.py),
and an activation that is its only reader and computes in the same dtype (GELU, ReLU, SiLU, sigmoid, tanh,
hardswish, ...; conv_onednn.py's list) is applied by oneDNN as it writes the product instead of by a kernel reading
it back. Inductor's freezing fuses the same (its mkldnn linear fusion); float32 Linears keep gemm.py's choice of
library (MKL or oneDNN) and stay products of the lowering, and so do float16 ones (no CPU this was measured or
tested on computes float16 natively: their products stay gemm.py's).
"""
from __future__ import annotations

import torch
import torch.fx

from compiler.graph_passes.conv_onednn import constant_meta, example, fuse_call
from compiler.graph_passes.freezing_autocast import autocast_regions
from compiler.graph_passes.fx_calls import LINEAR, call_arg
from compiler.machine import gemm_half, linear_packed


def _dtype_here(region: torch.dtype | None) -> torch.dtype | None:
    """bfloat16 for a Linear in a bfloat16 autocast region where oneDNN computes it from a pack, else None."""
    return region if region == torch.bfloat16 and gemm_half.packs_weights(region) else None


def linear_onednn(graph: torch.fx.Graph, const: set[torch.fx.Node]) -> int:
    """Each Linear with constant weight (and bias) in a bfloat16 autocast region oneDNN computes natively as
    lens.linear_onednn, an activation that is its only reader fused; returns how many Linears. The input is cast to
    the dtype as autocast casts it (a kernel's store, where a kernel computes it)."""
    regions = autocast_regions(graph)
    changed = 0
    for lin in list(graph.nodes):
        if lin.op != "call_function" or lin.target not in LINEAR:
            continue
        dtype = _dtype_here(regions.get(lin))
        x, weight, bias = lin.args[0], call_arg(lin, 1, "weight"), call_arg(lin, 2, "bias")
        val, out = example(x), example(lin)
        if (dtype is None or weight not in const or (bias is not None and bias not in const) or val is None
                or out is None or out.dtype != dtype or constant_meta(weight) != (dtype, 2)
                or (bias is not None and constant_meta(bias) != (dtype, 1))
                or val.dim() < 1 or not val.is_floating_point() or val.device.type != "cpu"):
            continue
        fuse_call(graph, lin, x, dtype, linear_packed.LINEAR_ONEDNN, (weight, bias))
        changed += 1
    return changed
