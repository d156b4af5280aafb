"""Which addmm's bias lowering leaves to the kernels that read the product (GraphLowering calls `mm` for it, then
adds the bias as a lazy pointwise value: compiler/lowering/graph.py)."""
from __future__ import annotations

import torch
import torch.fx

from compiler import config
from compiler.ir.size_symbols import same_size, shape_of
from compiler.lowering.registry import LOWERINGS


def bias_in_consumers(node: torch.fx.Node) -> bool:
    """Whether addmm's bias is better added by the kernels that read its result: ATen's addmm copies
    the broadcast bias into the output and the GEMM then reads it back (beta=1), two passes over the
    output that the consumer's kernel (the relu or GELU after a Linear, a residual add and layer norm)
    saves by adding a row of bias while it reads the product. Only a row bias of the output's floating
    dtype, plain alpha and beta, and users that all have lowerings (not the graph's output)."""
    if not config.unfuse_addmm_bias or len(node.args) != 3 or node.kwargs:
        return False
    out, bias = node.meta.get("val"), getattr(node.args[0], "meta", {}).get("val")
    if not isinstance(out, torch.Tensor) or not isinstance(bias, torch.Tensor):
        return False
    if out.dtype not in (torch.float32, torch.float64) or bias.dtype != out.dtype or out.dim() != 2:
        return False
    osize, bsize = shape_of(out), shape_of(bias)  # (sizes, not SymInts: comparing those adds guards)
    if bias.dim() not in (1, 2) or not same_size(bsize[-1], osize[1]) or (
            len(bsize) == 2 and bsize[0] != 1):
        return False
    return bool(node.users) and all(u.op == "call_function" and u.target in LOWERINGS for u in node.users)
