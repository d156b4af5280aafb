"""The `lens` backend as torch.compile finds it (entry point `torch_dynamo_backends: lens`): the frontend's
`lens_backend` with the tools registered on its hooks (compiler/hooks.py)."""
from __future__ import annotations

from compiler import hooks
from compiler.frontend.dynamo_backend import lens_backend
from compiler.tools import accuracy_mode, profiling_mode, saved_tensors

# in this order: a Dynamo graph under both profiling and an accuracy check is profiled
for _tool in (profiling_mode.TOOL, accuracy_mode.TOOL, saved_tensors.TOOL):
    hooks.register(_tool)

__all__ = ["lens_backend"]
