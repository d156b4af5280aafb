"""Lowering: aten FX nodes -> loop IR. Importing this package fills the lowering table."""
from compiler.lowering import concat, pointwise, pooling, reductions, views  # noqa: F401  (register lowerings)
from compiler.lowering.extern_calls import DynamicShapeGraph, EagerGraph
from compiler.lowering.graph import lower_graph
from compiler.lowering.registry import LOWERINGS

__all__ = ["lower_graph", "DynamicShapeGraph", "EagerGraph", "LOWERINGS"]
