"""The `lens` Dynamo backend: Dynamo's graph through the FX passes (compiler.pipeline.FX_PASSES), freezing, the caches and
AOTAutograd (with compiler.decompositions), whose aten graphs go through the pipeline's stages (compiler/pipeline.py)."""
from __future__ import annotations

import contextlib
import functools
import logging
from typing import Callable

import torch
import torch.fx

from compiler import config, hooks, pipeline
from compiler.codegen.plan import PlanError
from compiler.debug.compile_error import LensCompileError
from compiler.debug.directory import DebugDir
from compiler.debug.graph_source import readable_graph
from compiler.decompositions.table import decomposition_table
from compiler.decompositions.upsample import eager_upsample_kernels
from compiler.dynamo_skip import skip_compiler_package
from compiler.frontend import aot_cache, graph_cache
from compiler.frontend.direct_call import direct_inference_call, without_guard_check, without_pregraph_markers
from compiler.graph_passes.freezing import MODULE_TENSOR, freeze

log = logging.getLogger(__name__)
skip_compiler_package()


def _data_dependent_errors() -> tuple[type[BaseException], ...]:
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
    return GuardOnDataDependentSymNode, DataDependentOutputException, DynamicOutputShapeException


DATA_DEPENDENT_ERRORS = _data_dependent_errors()


def _eager_dynamo_graph(gm: torch.fx.GraphModule, error: BaseException, what: str) -> Callable:
    """Tracing the graph to aten failed, e.g. it needed a tensor's value (`take` or `tensor_split` with a
    tensor of indices): the whole Dynamo graph runs eagerly, and the debug directory says why."""
    graph_id = pipeline.next_graph_id()
    debug = DebugDir(graph_id) if config.debug else None
    if debug:
        debug.fx_graph_readable(readable_graph(gm).text)
    pipeline.note_runs_eagerly(graph_id, debug, pipeline.failure_text(what, error))
    return gm.forward


def _module_tensors_as_inputs(gm: torch.fx.GraphModule, example_inputs) -> tuple[torch.fx.GraphModule, list]:
    """Under `torch._inductor.config.freezing` (what CPU users are told to set) or Dynamo's `prepare_freezing`, with
    grad off, Dynamo installs a module's parameters and buffers as attributes of its graph (`get_attr`) instead of
    graph inputs; freezing (compiler/graph_passes/freezing.py) finds them among the inputs. So those attributes become
    trailing inputs again, marked as the module's, in a copy of the graph (Dynamo reads its own after we return).
    Returns the graph and the tensors each call appends: none in grad mode, where AOTAutograd lifts them itself."""
    from torch._dynamo.utils import is_parameter_freezing
    if not (is_parameter_freezing() or (torch._dynamo.config.prepare_freezing and not torch.is_grad_enabled())) \
            or not any(n.op == "get_attr" for n in gm.graph.nodes):
        return gm, []  # (elsewhere a graph's attributes are its own constants: compile_graph lifts them)
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    lifted = torch.fx.GraphModule(gm, graph)
    lifted.meta.update(gm.meta)
    consts = pipeline.lift_constants(lifted)
    for node in [n for n in lifted.graph.nodes if n.op == "placeholder"][len(example_inputs):]:
        node.meta[MODULE_TENSOR] = True
    return lifted, consts


_AOT_COMPILERS = {"fw_compiler": "forward", "bw_compiler": "backward", "inference_compiler": "inference"}


def _aot_compilers(cached: bool) -> tuple:
    """(the context to trace in, AOTAutograd's forward, backward and inference compilers): through its cache
    (compiler/frontend/aot_cache.py) unless a tool or a debug directory needs every graph compiled."""
    if not cached:
        return contextlib.nullcontext(), {
            hook: functools.partial(pipeline.compile_graph, kind=kind) for hook, kind in _AOT_COMPILERS.items()}
    return aot_cache.caching(graph_cache.compiler_key()), {
        hook: aot_cache.serializable(functools.partial(pipeline.compile_for_cache, kind=kind))
        for hook, kind in _AOT_COMPILERS.items()}


def lens_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs) -> Callable:
    """`torch.compile(fn, backend="lens")`: forward, backward and inference graphs get generated kernels
    (AOTAutograd compiles the backward at the first backward pass; its cache keeps both: compiler/frontend/aot_cache.py)."""
    from torch._dynamo.utils import counters
    from torch._functorch.aot_autograd import aot_module_simplified
    with_inputs, lifted = _module_tensors_as_inputs(gm, example_inputs)
    if lifted:
        inner = lens_backend(with_inputs, [*example_inputs, *lifted], **kwargs)
        return lambda *args: inner(*args, *lifted)
    pipeline.run_fx_passes(gm, example_inputs)
    frozen = freeze(gm, example_inputs)  # parameters as constants under no_grad (compiler/graph_passes/freezing.py)
    if frozen is not None:
        return frozen.wrap(lens_backend(frozen.gm, frozen.example_inputs, **kwargs), gm.forward)
    first_new = len(pipeline.COMPILED)
    tools = hooks.active_tools()  # (compiler/hooks.py: accuracy, profiling, saved tensors)
    cacheable = all(t.uses_graph_cache for t in tools)
    key, cached = graph_cache.lookup(gm, example_inputs) if cacheable else (None, None)
    if not any(t.keeps_profiler_markers for t in tools):
        without_pregraph_markers()
    without_guard_check()
    if cached is not None:
        return cached
    context, compilers = _aot_compilers(aot_cache.usable(example_inputs, bool(tools)))
    # torch's DDP optimizer (compile of a DDP model, split at bucket boundaries) reads this counter to learn that the
    # piece went through AOTAutograd, whose first call then hands it fake outputs (fakify_first_call): uncounted, the
    # piece's first real call returned them (issue 49). torch's own aot_autograd() backends count it so.
    counters["aot_autograd"]["total"] += 1
    try:
        with eager_upsample_kernels(), context:  # (half interpolation as ATen's kernel rounds it: decompositions.py)
            compiled = aot_module_simplified(gm, example_inputs, decompositions=decomposition_table(), **compilers)
        counters["aot_autograd"]["ok"] += 1
    except DATA_DEPENDENT_ERRORS as e:
        return _eager_dynamo_graph(gm, e, "tracing it to aten needs data-dependent values")
    except (LensCompileError, PlanError, torch._dynamo.exc.TorchDynamoException):
        raise  # (a bug reproduced on purpose; a planning bug under config.verify_plan; Dynamo's restarts)
    except Exception as e:  # noqa: BLE001 (a bug of ours or of AOTAutograd: the graph runs, op by op)
        log.debug("kernel-lens: tracing to aten failed", exc_info=True)
        return _eager_dynamo_graph(gm, e, "tracing it to aten failed")
    wrap = next((t.wrap_dynamo_graph for t in tools if t.wrap_dynamo_graph), None)
    if wrap is not None:
        return wrap(gm.forward, compiled, pipeline.COMPILED[first_new:])
    direct = direct_inference_call(gm, example_inputs, pipeline.COMPILED[first_new:])
    if direct is not None and key is not None and pipeline.COMPILED[first_new].output_code_path:
        new = pipeline.COMPILED[first_new]
        graph_cache.store(key, new.output_code_path, len(example_inputs), new.constants)
    return direct or compiled
