"""Kernel-local buffers: which buffers only their own kernel reads become a scalar per outer iteration
or a per-iteration stack array in the C++, instead of a full-size allocation."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from compiler.codegen import half
from compiler.ir.nodes import Layout, nonunit_dims
from compiler.ir.size_symbols import Size, is_static
from compiler.scheduler import FusedKernel


@dataclass
class LocalBuffer:
    """A buffer that lives inside its kernel: a scalar per outer iteration, or an array of `numel`."""

    name: str
    scalar: bool
    numel: Size  # a symbolic one (Dynamo's sizes) lives on the heap, one row per thread


# Largest per-iteration array a kernel keeps on the (thread's) stack.
MAX_LOCAL_BYTES = 64 * 1024


class LocalBufferError(Exception):
    """A local buffer is read at an index the kernel never wrote in the current outer iteration (a bug)."""


def plan_locals(k: FusedKernel, layouts: dict[str, tuple[torch.dtype, Layout]]) -> dict[str, LocalBuffer]:
    """Which of the kernel's local buffers become scalars or per-iteration arrays (the rest stay buffers)."""
    out: dict[str, LocalBuffer] = {}
    for n in k.nodes:
        if n.name not in k.local:
            continue
        dims = nonunit_dims(n.layout.size)
        inner = dims[len(k.outer):]
        if not inner:
            out[n.name] = LocalBuffer(f"{n.name}_local", True, 1)
            continue
        if n.reduction_type or n.loop_order is not None or any(n.layout.stride[d] < 0 for d in inner):
            continue
        numel = 1 + sum((n.layout.size[d] - 1) * n.layout.stride[d] for d in inner)
        if not is_static(numel):  # a symbolic row: a per-thread heap row (codegen/strategies/symbolic_sizes.py `scratch_row`)
            out[n.name] = LocalBuffer(f"{n.name}_local", False, numel)
        elif numel * half.compute_itemsize(n.dtype) <= MAX_LOCAL_BYTES:  # (a half value is a float there)
            out[n.name] = LocalBuffer(f"{n.name}_local", False, numel)
    return out
