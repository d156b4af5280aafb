"""Calling an inference graph's generated code without AOTAutograd's runtime wrappers.

Under `torch.no_grad()` AOTAutograd compiles one inference graph and wraps it in runtime wrappers that
replay input mutations and metadata changes outside the graph, regenerate outputs that alias inputs or each
other, and add and drop inputs (parameters, effect tokens, RNG state, duplicates). When none of that applies
the wrappers only cost time, most after a kernel that streamed its inputs through the caches: a call on an
(8, 8) tensor right after a 32 MiB stream spent 13 of its 92 us in them on the device's Xeon (22 of 224 us
on the AMD machine); x.mean(-1) on (8192, 1024) through torch.compile, 2 threads, medians of 60 calls in
rotating order: 921 -> 907 and 965 -> 937 us on the device (eager 868 and 947). So when the graph takes exactly
Dynamo's inputs, changes none of them and returns tensors that alias nothing, Dynamo gets a function that
calls the generated code directly. Dynamo guards on grad mode, so a call with grad enabled compiles again
(through AOTAutograd); `config.direct_inference_calls` (LENS_DIRECT_CALLS=0) turns this off.

`without_pregraph_markers` takes out the other per-call cost a backend can: Dynamo's bytecode calling a graph
first calls two functions (each behind Dynamo's disable wrapper) that record a "Pregraph bytecode" event when a
profiler runs. A compiled x.mean(-1) on (8, 8) called right after a 32 MiB stream took 75 us with them and 65 us
without (eager: 36 us). Dynamo reads its setting while it generates the frame's bytecode, after the backend
returns, so the backend turns it off and a compile-end callback puts the user's value back.

`without_guard_check` takes out a per-compile cost: Dynamo, having built a frame's guards, checks them once on
that frame and times them after flushing the caches (a buffer the size of the last-level cache written: 260 MiB
here). A transformer encoder layer's warm compile (Dynamo tracing it again, lens's cache hit): 108.6 -> 89.0 ms.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import torch
import torch.fx
from torch.multiprocessing.reductions import StorageWeakRef

from compiler import config
from compiler.graph_passes.fx_calls import mutates

if TYPE_CHECKING:
    from compiler.compiled_graph import CompiledGraph



def direct_inference_call(dynamo_gm: torch.fx.GraphModule, example_inputs: Sequence,
                          graphs: list[CompiledGraph]) -> Callable | None:
    """A callable taking Dynamo's inputs and running `graphs`' one inference graph directly, or None when
    AOTAutograd's wrappers have work to do (or could have: anything not plainly safe keeps them)."""
    if not config.direct_inference_calls or torch.is_grad_enabled() or len(graphs) != 1:
        return None
    graph = graphs[0]
    if graph.gm is None or graph.kernel_map is None or graph.kernel_map.graph_kind != "inference":
        return None
    if not all(type(t) in (torch.Tensor, torch.nn.Parameter, int, torch.SymInt) for t in example_inputs) or \
            mutates(dynamo_gm):
        return None
    aten = graph.gm
    if any(isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable
           for n in aten.graph.nodes if n.op == "call_function"):
        return None
    inputs = [n.meta.get("val") for n in aten.graph.nodes if n.op == "placeholder"][:graph.num_inputs]
    if graph.num_inputs != len(example_inputs) or not all(_same_input(v, t) for v, t in zip(inputs, example_inputs)):
        return None  # AOTAutograd added, dropped or reordered inputs
    outputs = list(aten.graph.output_node().args[0])
    if len(outputs) != len(_outputs(dynamo_gm)):
        return None  # mutated inputs or aliased outputs' bases are returned too
    storages = {StorageWeakRef(v.untyped_storage()) for v in inputs if isinstance(v, torch.Tensor)}
    for out in outputs:
        val = out.meta.get("val") if isinstance(out, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor):
            return None
        ref = StorageWeakRef(val.untyped_storage())
        if ref in storages:
            return None  # a view of an input or of another output
        storages.add(ref)
    return direct_run(graph.call)


def _same_input(traced, given) -> bool:
    """Whether the aten graph's input is Dynamo's: a tensor of the same layout (a symbolic size compared by its
    example value, never by a comparison that would add a guard), or a size argument."""
    if isinstance(given, (int, torch.SymInt)):
        return isinstance(traced, (int, torch.SymInt))
    return (isinstance(traced, torch.Tensor) and traced.dtype == given.dtype
            and _same_sizes(traced.shape, given.shape) and _same_sizes(traced.stride(), given.stride()))


def _same_sizes(traced, given) -> bool:
    return len(traced) == len(given) and all(
        (s.node.hint if isinstance(s, torch.SymInt) else s) == g for s, g in zip(traced, given))


def direct_run(call: Callable) -> Callable:
    """Dynamo's calling convention (positional inputs) over generated code's boxed `call(args)`."""
    def run(*args):
        return call(list(args))

    run._lens_direct = True  # type: ignore[attr-defined]
    return run


def _outputs(gm: torch.fx.GraphModule) -> list:
    out = gm.graph.output_node().args[0]
    return list(out) if isinstance(out, (tuple, list)) else [out]


_SAVED_MARKERS: list[bool] = []  # the user's record_runtime_overhead while a lens frame compiles


def without_pregraph_markers() -> None:
    """Generate the frame being compiled without Dynamo's pregraph profiler markers (`config.pregraph_markers`
    keeps them); the setting is restored when Dynamo finishes compiling the frame (left alone where this torch
    has no compile-end callbacks to restore it with)."""
    dynamo_config = torch._dynamo.config
    if config.pregraph_markers or not hasattr(dynamo_config, "record_runtime_overhead") or not _restore_installed():
        return
    if not _SAVED_MARKERS:
        _SAVED_MARKERS.append(dynamo_config.record_runtime_overhead)
    dynamo_config.record_runtime_overhead = False


def _restore_markers(_args=None) -> None:
    if _SAVED_MARKERS:
        torch._dynamo.config.record_runtime_overhead = _SAVED_MARKERS.pop()


def _restore_installed() -> bool:
    try:
        from torch._dynamo.callback import callback_handler
    except ImportError:
        return False
    if _restore_markers not in callback_handler.end_callbacks:
        callback_handler.register_end_callback(_restore_markers)
    return True


def without_guard_check() -> None:
    """Dynamo's check and timing of the guards of the frame being compiled, skipped (`config.guard_check` keeps
    them; left alone where this torch has no such switch, or no frame is being traced)."""
    if config.guard_check:
        return
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator
        output = InstructionTranslator.current_tx().output
    except (ImportError, AttributeError):
        return
    if hasattr(output, "skip_guards_check"):
        output.skip_guards_check = True
