"""Parses our compiler's `kernel_map.json` through the format package, which owns its fields."""
from __future__ import annotations

from lens_format.kernel_map import KernelArg, KernelMap, MappedKernel, MappedLine, MappedNode, read_kernel_map

parse_kernel_map = read_kernel_map
__all__ = ["KernelArg", "KernelMap", "MappedKernel", "MappedLine", "MappedNode", "parse_kernel_map"]
