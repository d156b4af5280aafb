"""Where the tools take part in a compile: a tool registers a `Tool` here and the frontend runs the wrappers of each
one whose mode is on, so the pipeline imports no tool (the `lens` entry point, compiler/backend.py, registers them)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from compiler.compiled_graph import CompiledGraph

# (the graph, its boxed call so far) -> the boxed call that runs instead
GraphWrapper = Callable[["CompiledGraph", Callable], Callable]
# (the Dynamo graph run eagerly, its compiled callable, the lens graphs that compile produced) -> what Dynamo calls
DynamoGraphWrapper = Callable[[Callable, Callable, "list[CompiledGraph]"], Callable]


@dataclass(frozen=True)
class Tool:
    """A debugging mode (accuracy, profiling, saved tensors) that takes part in compiles while `active()`."""

    name: str
    active: Callable[[], bool]
    wrap_code: GraphWrapper | None = None  # each graph's generated code, called with its lifted constants appended
    wrap_graph: GraphWrapper | None = None  # each graph's call as AOTAutograd makes it (the caller's inputs)
    wrap_dynamo_graph: DynamoGraphWrapper | None = None  # the first active tool's wrapper wins
    uses_graph_cache: bool = True  # False: a warm start from the graph cache would skip what the tool does
    keeps_profiler_markers: bool = False  # Dynamo's pregraph profiler markers stay in the frames lens compiles


_TOOLS: dict[str, Tool] = {}


def register(tool: Tool) -> None:
    """Adds `tool` after those registered before (a tool registered again keeps its place, with the new wrappers)."""
    _TOOLS[tool.name] = tool


def active_tools() -> list[Tool]:
    """The registered tools whose mode is on, in registration order."""
    return [t for t in _TOOLS.values() if t.active()]
