"""The `lens` Dynamo backend: AOTAutograd + decompositions give aten graphs, which this module sends
through the pipeline (lower -> schedule -> codegen -> build -> load) and into the debug directory."""
from __future__ import annotations

import contextlib
import functools
import itertools
import logging
from typing import Callable

import torch
import torch.fx

from compiler import config, decisions, hooks
from compiler.codegen import plan_record
from compiler.codegen.plan import PlanError
from compiler.codegen.wrapper import OutputCode, generate_output_code
from compiler.compiled_graph import CompiledGraph, with_constants
from compiler.debug.compile_error import LensCompileError, map_compile_error
from compiler.debug.directory import DebugDir
from compiler.debug.graph_source import ReadableGraph, readable_graph
from compiler.debug.kernel_map import build_kernel_map
from compiler.debug.repro_code import input_specs, runnable_graph_code
from compiler.decompositions.table import decomposition_table
from compiler.decompositions.upsample import eager_upsample_kernels
from compiler.dynamo_skip import skip_compiler_package
from compiler.frontend import aot_cache, graph_cache
from compiler.frontend.direct_call import direct_inference_call, without_guard_check, without_pregraph_markers
from compiler.graph_passes.conv_layout import conv_channels_last
from compiler.graph_passes.freezing import freeze
from compiler.graph_passes.transformer_fast_path import inline_fast_paths
from compiler.ir.nodes import format_node
from compiler.lowering import EagerGraph, lower_graph
from compiler.machine.build import CppCompileError
from compiler.machine.runtime import load_output_code
from compiler.scheduler import format_schedule, schedule
from lens_format.notes import EagerNote

log = logging.getLogger(__name__)
skip_compiler_package()
_GRAPH_IDS = itertools.count()
COMPILED: list["CompiledGraph"] = []  # every graph this process compiled, in order
EAGER: list[tuple[str, str]] = []  # (graph id, why) of every graph that runs eagerly instead, in order


def _eager(gm: torch.fx.GraphModule) -> Callable:
    def call(args):
        out = gm(*args)
        args.clear()
        return out

    call._boxed_call = True  # type: ignore[attr-defined]
    return call


def compile_graph(gm: torch.fx.GraphModule, example_inputs, kind: str = "inference") -> Callable:
    """AOTAutograd's compiler hook: a boxed callable running `gm` with generated kernels."""
    return compile_to_graph(gm, example_inputs, kind).call


def _compile_for_cache(gm: torch.fx.GraphModule, example_inputs, kind: str) -> tuple:
    """AOTAutograd's compiler hook under compiler/frontend/aot_cache.py: (the boxed call, the output code's text or None
    when the graph runs eagerly, its lifted constants)."""
    compiled = compile_to_graph(gm, example_inputs, kind)
    return compiled.call, compiled.code.text if compiled.code is not None else None, compiled.constants


def lift_constants(gm: torch.fx.GraphModule) -> list[torch.Tensor]:
    """Turn `get_attr` tensors into trailing graph inputs; returns the tensors to append to the args."""
    consts = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node in list(gm.graph.nodes):
        if node.op != "get_attr":
            continue
        value = getattr(gm, node.target)
        anchor = placeholders[-1] if placeholders else next(iter(gm.graph.nodes))
        with gm.graph.inserting_after(anchor):
            ph = gm.graph.placeholder(f"const_{len(consts)}")
        ph.meta.update(node.meta)
        node.replace_all_uses_with(ph)
        gm.graph.erase_node(node)
        placeholders.append(ph)
        consts.append(value)
    if consts:
        gm.recompile()
    return consts


def compile_to_graph(gm: torch.fx.GraphModule, example_inputs, kind: str = "inference") -> CompiledGraph:
    graph_id = f"graph_{next(_GRAPH_IDS)}"
    num_inputs = len(example_inputs)
    consts = lift_constants(gm)
    example_inputs = list(example_inputs) + consts
    readable = readable_graph(gm)
    debug = DebugDir(graph_id) if config.debug else None
    if debug:
        debug.fx_graph_readable(readable.text)
        debug.fx_graph_runnable(runnable_graph_code(gm, input_specs(example_inputs),
                                                    f"{graph_id} ({kind}) of a Kernel Lens run"))
        debug.fx_graph_transformed(readable.text)
    if debug:
        _write_symbols(debug, gm)
    try:
        decisions.begin()  # the stages report what they decide (why.json)
        ir = lower_graph(gm)
    except EagerGraph as e:
        return _eager_graph(graph_id, readable, debug, gm, consts, str(e))
    except Exception as e:  # noqa: BLE001 (a lowering bug outside a node's own lowering)
        log.debug("kernel-lens: %s: lowering failed", graph_id, exc_info=True)
        return _eager_graph(graph_id, readable, debug, gm, consts, _failure("lowering failed", e))
    if debug:
        debug.ir_pre_fusion("\n\n".join(format_node(n) for n in ir.nodes) + "\n")
    try:  # a failure past lowering is a compiler bug: the graph runs eagerly, the user's program goes on
        plan_record.begin()  # the renderer reports each kernel's plan (kernel_plans.json)
        sg = schedule(ir, readable.op_names)
        header = f"Kernel Lens output code for {graph_id} ({kind}); FX graph: fx_graph_readable.py"
        code = generate_output_code(sg, readable.lines, graph_id, header)
        kmap = build_kernel_map(graph_id, readable, code, graph_kind=kind, graph=sg)
    except PlanError:
        raise  # (config.verify_plan, on in the tests: a planning pass's bug fails loudly, it does not run eagerly)
    except Exception as e:  # noqa: BLE001 (any bug, never a failed torch.compile)
        log.debug("kernel-lens: %s: code generation failed", graph_id, exc_info=True)
        return _eager_graph(graph_id, readable, debug, gm, consts, _failure("code generation failed", e))
    if debug:
        debug.ir_post_fusion(format_schedule(sg))
        debug.why(decisions.finish(graph_id, ir.nodes, kmap.kernels))
        debug.kernel_plans(plan_record.finish(graph_id))
        debug.output_code(code.text)
        debug.kernel_map(kmap.to_json())
    notes = list(ir.notes)
    if debug:
        debug.notes(notes)
    try:
        module = load_output_code(code.text)
    except CppCompileError as e:
        report = map_compile_error(e, code, kmap, readable)
        if debug:
            kmap.status = "compile_error"
            debug.kernel_map(kmap.to_json())
            debug.compile_error(report.to_json(graph_id))
        if config.cpp.op_overrides:  # a codegen bug reproduced on purpose: the error is what the user asked for
            raise LensCompileError(report, debug.path if debug else None) from None
        return _eager_graph(graph_id, readable, debug, gm, consts, _failure("g++ failed", e), notes)
    except Exception as e:  # noqa: BLE001 (a library that does not load, a broken generated module)
        return _eager_graph(graph_id, readable, debug, gm, consts, _failure("loading its code failed", e), notes)
    if debug:
        _write_vectorization(debug, code, getattr(module, "cpp_source", None))
    call = module.call
    call._boxed_call = True
    compiled = CompiledGraph(graph_id, readable, code, kmap, debug, call, gm, num_inputs=num_inputs,
                             output_code_path=module.__file__, constants=consts)
    tools = hooks.active_tools()
    for tool in tools:
        if tool.wrap_code:
            compiled.call = tool.wrap_code(compiled, compiled.call)
    compiled.call = with_constants(compiled.call, consts)
    for tool in tools:
        if tool.wrap_graph:
            compiled.call = tool.wrap_graph(compiled, compiled.call)
    COMPILED.append(compiled)
    return compiled


def _write_vectorization(debug: DebugDir, code: OutputCode, cpp_source: str | None) -> None:
    from compiler.machine.build import opt_info_report, vectorization_report
    report = opt_info_report(cpp_source) if cpp_source else None
    if report is not None:
        debug.vectorization(vectorization_report(cpp_source, report, code.cpp_first_line - 1))


def compile_quietly(gm: torch.fx.GraphModule, example_inputs) -> Callable:
    """Compile without a debug directory (instrumented or minified graphs)."""
    old = config.debug
    config.debug = False
    try:
        return compile_graph_module(gm, example_inputs)
    finally:
        config.debug = old


def compile_graph_module(gm: torch.fx.GraphModule, example_inputs) -> Callable:
    """Compile an aten-level GraphModule directly (repro scripts, minifier, accuracy checks)."""
    if any("val" not in n.meta for n in gm.graph.nodes if n.op != "output"):
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.passes.fake_tensor_prop import FakeTensorProp
        FakeTensorProp(gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*example_inputs)
    return compile_graph(gm, example_inputs)


def _data_dependent_errors() -> tuple[type[BaseException], ...]:
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
    return GuardOnDataDependentSymNode, DataDependentOutputException, DynamicOutputShapeException


DATA_DEPENDENT_ERRORS = _data_dependent_errors()


def _eager_dynamo_graph(gm: torch.fx.GraphModule, error: BaseException, what: str) -> Callable:
    """Tracing the graph to aten failed, e.g. it needed a tensor's value (`take` or `tensor_split` with a
    tensor of indices): the whole Dynamo graph runs eagerly, and the debug directory says why."""
    graph_id = f"graph_{next(_GRAPH_IDS)}"
    debug = DebugDir(graph_id) if config.debug else None
    if debug:
        debug.fx_graph_readable(readable_graph(gm).text)
    _note_runs_eagerly(graph_id, debug, _failure(what, error))
    return gm.forward


def _failure(what: str, e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{what}: {type(e).__name__}: {text[:300]}"


def _eager_graph(graph_id: str, readable: ReadableGraph, debug: DebugDir | None, gm: torch.fx.GraphModule,
                 consts: list, why: str, notes: list[str] = ()) -> CompiledGraph:
    """A graph that runs as its FX graph, op by op (ATen), with the reason logged and in notes.txt."""
    _note_runs_eagerly(graph_id, debug, why, list(notes))
    return CompiledGraph(graph_id, readable, None, None, debug, with_constants(_eager(gm), consts))


def _write_symbols(debug: DebugDir, gm: torch.fx.GraphModule) -> None:
    """symbols.json for a graph over Dynamo's size symbols (nothing for a static graph)."""
    from compiler.ir.size_symbols import graph_symbols
    try:
        data = graph_symbols(gm)
    except Exception as e:  # noqa: BLE001 (debug output never breaks compilation)
        log.warning("kernel-lens: symbols.json of %s left out: %s: %s", debug.graph_id, type(e).__name__, e)
        return
    if data is not None:
        debug.symbols(data)


def _note_runs_eagerly(graph_id: str, debug: DebugDir | None, why: str, notes: list[str] = ()) -> None:
    """The log line and the debug note of a graph that runs eagerly instead of as generated code."""
    log.warning("kernel-lens: %s runs eagerly: %s", graph_id, why)
    EAGER.append((graph_id, why))
    if debug:
        debug.why(decisions.eager_graph(graph_id, why))
    if debug:
        debug.notes([*notes, EagerNote(graph_id, why).to_line()])


_AOT_COMPILERS = {"fw_compiler": "forward", "bw_compiler": "backward", "inference_compiler": "inference"}


def _aot_compilers(cached: bool) -> tuple:
    """(the context to trace in, AOTAutograd's forward, backward and inference compilers): through its cache
    (compiler/frontend/aot_cache.py) unless a tool or a debug directory needs every graph compiled."""
    if not cached:
        return contextlib.nullcontext(), {
            hook: functools.partial(compile_graph, kind=kind) for hook, kind in _AOT_COMPILERS.items()}
    return aot_cache.caching(graph_cache.compiler_key()), {
        hook: aot_cache.serializable(functools.partial(_compile_for_cache, kind=kind))
        for hook, kind in _AOT_COMPILERS.items()}


def lens_backend(gm: torch.fx.GraphModule, example_inputs, **kwargs) -> Callable:
    """`torch.compile(fn, backend="lens")`: forward, backward and inference graphs get generated kernels
    (AOTAutograd compiles the backward at the first backward pass; its cache keeps both: compiler/frontend/aot_cache.py)."""
    from torch._functorch.aot_autograd import aot_module_simplified
    inline_fast_paths(gm)  # (nn.TransformerEncoderLayer's fused op as its ops, autocast's casts and all)
    conv_channels_last(gm, example_inputs)  # (training graphs' convolutions: compiler/graph_passes/conv_layout.py)
    frozen = freeze(gm, example_inputs)  # parameters as constants under no_grad (compiler/graph_passes/freezing.py)
    if frozen is not None:
        return frozen.wrap(lens_backend(frozen.gm, frozen.example_inputs, **kwargs), gm.forward)
    first_new = len(COMPILED)
    tools = hooks.active_tools()  # (compiler/hooks.py: accuracy, profiling, saved tensors)
    cacheable = all(t.uses_graph_cache for t in tools)
    key, cached = graph_cache.lookup(gm, example_inputs) if cacheable else (None, None)
    if not any(t.keeps_profiler_markers for t in tools):
        without_pregraph_markers()
    without_guard_check()
    if cached is not None:
        return cached
    context, compilers = _aot_compilers(aot_cache.usable(example_inputs, bool(tools)))
    try:
        with eager_upsample_kernels(), context:  # (half interpolation as ATen's kernel rounds it: decompositions.py)
            compiled = aot_module_simplified(gm, example_inputs, decompositions=decomposition_table(), **compilers)
    except DATA_DEPENDENT_ERRORS as e:
        return _eager_dynamo_graph(gm, e, "tracing it to aten needs data-dependent values")
    except (LensCompileError, torch._dynamo.exc.TorchDynamoException):  # (Dynamo's restarts are its control flow)
        raise
    except Exception as e:  # noqa: BLE001 (a bug of ours or of AOTAutograd: the graph runs, op by op)
        log.debug("kernel-lens: tracing to aten failed", exc_info=True)
        return _eager_dynamo_graph(gm, e, "tracing it to aten failed")
    wrap = next((t.wrap_dynamo_graph for t in tools if t.wrap_dynamo_graph), None)
    if wrap is not None:
        return wrap(gm.forward, compiled, COMPILED[first_new:])
    direct = direct_inference_call(gm, example_inputs, COMPILED[first_new:])
    if direct is not None and key is not None and COMPILED[first_new].output_code_path:
        new = COMPILED[first_new]
        graph_cache.store(key, new.output_code_path, len(example_inputs), new.constants)
    return direct or compiled
