"""`CompiledGraph`: what one compile of the frontend produced (its own module so that the stages and tools that
take one, direct_call among them, need not import the frontend)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from compiler.codegen.wrapper import OutputCode
from compiler.debug.directory import DebugDir
from compiler.debug.graph_source import ReadableGraph
from compiler.debug.kernel_map import KernelMap


@dataclass
class CompiledGraph:
    """What one compile produced: ids, files' contents, and the callable that runs it."""

    graph_id: str
    readable: ReadableGraph
    code: OutputCode | None
    kernel_map: KernelMap | None
    debug: DebugDir | None
    call: Callable
    gm: torch.fx.GraphModule | None = None
    recorded_inputs: list | None = None  # the first real inputs, kept only while checking accuracy
    num_inputs: int = 0  # inputs the caller passes (gm's placeholders after them are lifted constants)
    output_code_path: str | None = None  # the imported output_code.py (in the cache)
    constants: list = field(default_factory=list)  # the lifted get_attr tensors appended to each call's args


def with_constants(call: Callable, consts: list[torch.Tensor]) -> Callable:
    """A boxed call appending a graph's lifted constants (compiler/frontend/dynamo_backend.py: lift_constants) to its args."""
    if not consts:
        return call

    def run(args):
        args.extend(consts)
        return call(args)

    run._boxed_call = True  # type: ignore[attr-defined]
    return run
