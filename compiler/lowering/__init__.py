"""Lowering: aten FX nodes -> loop IR. Importing this package fills the lowering table."""
from compiler.lowering import pointwise, reductions, views  # noqa: F401  (register lowerings)
from compiler.lowering.graph import DynamicShapeGraph, EagerGraph, lower_graph
from compiler.lowering.registry import LOWERINGS

__all__ = ["lower_graph", "DynamicShapeGraph", "EagerGraph", "LOWERINGS"]
