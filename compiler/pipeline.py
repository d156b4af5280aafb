"""The pipeline, written once as data. FX_PASSES rewrite Dynamo's graph before AOTAutograd traces it to aten (with
`compiler.decompositions`); then every aten graph goes through STAGES in order, each stage writing its debug files
before the next one runs, the way Triton's `compile()` runs its stages. `compile_to_graph` is that loop."""
from __future__ import annotations

import contextlib
import itertools
import logging
import os
from dataclasses import dataclass, field
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
from compiler.debug.kernel_map import KernelMap, build_kernel_map
from compiler.debug.repro_code import input_specs, runnable_graph_code
from compiler.graph_passes.conv_layout import conv_channels_last
from compiler.lowering.cse import fold_duplicates
from compiler.graph_passes.transformer_fast_path import inline_fast_paths
from compiler.ir.nodes import format_node
from compiler.lowering import EagerGraph, lower_graph
from compiler.machine.build import CppCompileError
from compiler.machine.runtime import load_output_code
from compiler.scheduler import ScheduledGraph, format_schedule, schedule
from lens_format.notes import EagerNote

log = logging.getLogger(__name__)
_GRAPH_IDS = itertools.count()
_QUIET_IDS = itertools.count()  # compile_quietly's graphs: the program's own keep consecutive numbers
_quiet = False
COMPILED: list[CompiledGraph] = []  # every graph this process compiled, in order
EAGER: list[tuple[str, str]] = []  # (graph id, why) of every graph that runs eagerly instead, in order

# where Dynamo's graph becomes aten: AOTAutograd traces with this package's table (compiler/frontend/dynamo_backend.py)
TRACE_TO_ATEN = "compiler.decompositions"


@dataclass(frozen=True)
class GraphPass:
    """An FX pass over Dynamo's graph, in place, before AOTAutograd."""

    name: str
    module: str
    run: Callable[[torch.fx.GraphModule, list], None]


FX_PASSES: tuple[GraphPass, ...] = (
    # nn.TransformerEncoderLayer's fused fast-path call as the module's ops (autocast then casts its products)
    GraphPass("transformer fast paths", "compiler.graph_passes.transformer_fast_path",
              lambda gm, example_inputs: inline_fast_paths(gm)),
    # half-dtype training graphs' convolutions read input and weight channels-last
    GraphPass("training convolutions channels-last", "compiler.graph_passes.conv_layout", conv_channels_last),
)
# then freezing (compiler/graph_passes/freezing.py), under no_grad: it hands back a graph over constants, which enters
# the backend again (compiler/frontend/dynamo_backend.py: lens_backend)


def run_fx_passes(gm: torch.fx.GraphModule, example_inputs: list) -> None:
    for graph_pass in FX_PASSES:
        graph_pass.run(gm, example_inputs)


@dataclass
class GraphCompile:
    """One aten graph on its way through the stages: what each stage made so far."""

    graph_id: str
    kind: str  # "forward", "backward" or "inference"
    gm: torch.fx.GraphModule
    consts: list
    readable: ReadableGraph
    debug: DebugDir | None
    ir: object = None  # lowering's graph (compiler/lowering: LoweredGraph)
    scheduled: ScheduledGraph | None = None
    code: OutputCode | None = None
    kernel_map: KernelMap | None = None
    module: object = None  # the loaded output_code.py
    notes: list[str] = field(default_factory=list)


class RunsEagerly(Exception):
    """A stage gives the graph up: it runs op by op (ATen), and this says why."""


def _lower(c: GraphCompile) -> None:
    decisions.begin()  # the stages report what they decide (why.json)
    if config.fold_duplicates:
        for folded, kept in fold_duplicates(c.gm).items():
            decisions.record("reused", [folded, kept], "duplicate", kept=kept)
    c.ir = lower_graph(c.gm)


def _write_lowered(debug: DebugDir, c: GraphCompile) -> None:
    debug.ir_pre_fusion("\n\n".join(format_node(n) for n in c.ir.nodes) + "\n")


def _schedule(c: GraphCompile) -> None:
    plan_record.begin()  # the renderer reports each kernel's plan (kernel_plans.json)
    c.scheduled = schedule(c.ir, c.readable.op_names)


def _write_scheduled(debug: DebugDir, c: GraphCompile) -> None:
    debug.ir_post_fusion(format_schedule(c.scheduled))


def _generate(c: GraphCompile) -> None:
    header = f"Kernel Lens output code for {c.graph_id} ({c.kind}); FX graph: fx_graph_readable.py"
    c.code = generate_output_code(c.scheduled, c.readable.lines, c.graph_id, header)


def _write_generated(debug: DebugDir, c: GraphCompile) -> None:
    debug.kernel_plans(plan_record.finish(c.graph_id))
    debug.output_code(c.code.text)


def _map(c: GraphCompile) -> None:
    c.kernel_map = build_kernel_map(c.graph_id, c.readable, c.code, graph_kind=c.kind, graph=c.scheduled)
    c.notes = list(c.ir.notes)


def _write_mapped(debug: DebugDir, c: GraphCompile) -> None:
    debug.why(decisions.finish(c.graph_id, c.ir.nodes, c.kernel_map.kernels))
    debug.kernel_map(c.kernel_map.to_json())
    debug.notes(c.notes)


def _build(c: GraphCompile) -> None:
    try:
        c.module = load_output_code(c.code.text)
    except CppCompileError as e:
        report = map_compile_error(e, c.code, c.kernel_map, c.readable)
        if c.debug:
            c.kernel_map.status = "compile_error"
            c.debug.kernel_map(c.kernel_map.to_json())
            c.debug.compile_error(report.to_json(c.graph_id))
        if config.cpp.op_overrides:  # a codegen bug reproduced on purpose: the error is what the user asked for
            raise LensCompileError(report, c.debug.path if c.debug else None) from None
        raise RunsEagerly(failure_text("g++ failed", e)) from None


def _write_built(debug: DebugDir, c: GraphCompile) -> None:
    from compiler.machine.build import opt_info_report, vectorization_report
    cpp_source = getattr(c.module, "cpp_source", None)
    report = opt_info_report(cpp_source) if cpp_source else None
    if report is not None:
        debug.vectorization(vectorization_report(cpp_source, report, c.code.cpp_first_line - 1))


@dataclass(frozen=True)
class Stage:
    """One stage: what it runs, the debug files it writes once it has, and what a failure in it is called."""

    name: str
    modules: tuple[str, ...]  # the code of the stage, in the order data moves through it (tests/lens_format)
    files: tuple[str, ...]
    run: Callable[[GraphCompile], None]
    write: Callable[[DebugDir, GraphCompile], None]
    failure: str


STAGES: tuple[Stage, ...] = (
    Stage("lower", ("compiler.lowering",), ("ir_pre_fusion.txt",), _lower, _write_lowered, "lowering failed"),
    Stage("schedule", ("compiler.scheduler",), ("ir_post_fusion.txt",), _schedule, _write_scheduled,
          "code generation failed"),
    Stage("generate", ("compiler.codegen", "compiler.codegen.wrapper"), ("kernel_plans.json", "output_code.py"),
          _generate, _write_generated, "code generation failed"),
    Stage("map", ("compiler.debug.kernel_map",), ("why.json", "kernel_map.json", "notes.txt"), _map, _write_mapped,
          "code generation failed"),
    Stage("build", ("compiler.machine",), ("vectorization.txt",), _build, _write_built, "loading its code failed"),
)


def next_graph_id() -> str:
    return f"quiet_{next(_QUIET_IDS)}" if _quiet else f"graph_{next(_GRAPH_IDS)}"


def compile_to_graph(gm: torch.fx.GraphModule, example_inputs, kind: str = "inference") -> CompiledGraph:
    """Run one aten graph through STAGES; any stage's failure (a bug of ours) runs the graph eagerly instead."""
    graph_id = next_graph_id()
    num_inputs = len(example_inputs)
    consts = lift_constants(gm)
    example_inputs = list(example_inputs) + consts
    c = GraphCompile(graph_id, kind, gm, consts, readable_graph(gm), DebugDir(graph_id) if config.debug else None)
    if c.debug:
        _write_graph(c.debug, c, example_inputs)
    for stage in STAGES:
        try:
            stage.run(c)
        except (PlanError, LensCompileError):
            raise  # (a planning pass's bug under config.verify_plan, a build error reproduced on purpose)
        except (RunsEagerly, EagerGraph) as e:
            return _eager_graph(c, str(e))
        except Exception as e:  # noqa: BLE001 (any bug, never a failed torch.compile)
            log.debug("kernel-lens: %s: %s", graph_id, stage.failure, exc_info=True)
            return _eager_graph(c, failure_text(stage.failure, e))
        if c.debug:
            stage.write(c.debug, c)
    return _compiled(c, num_inputs)


def _compiled(c: GraphCompile, num_inputs: int) -> CompiledGraph:
    """The built graph's call, wrapped by the active tools (compiler/hooks.py) around its lifted constants."""
    call = c.module.call
    call._boxed_call = True
    compiled = CompiledGraph(c.graph_id, c.readable, c.code, c.kernel_map, c.debug, call, c.gm,
                             num_inputs=num_inputs, output_code_path=c.module.__file__, constants=c.consts)
    tools = hooks.active_tools()
    for tool in tools:
        if tool.wrap_code:
            compiled.call = tool.wrap_code(compiled, compiled.call)
    compiled.call = first_call_falls_back(with_constants(compiled.call, c.consts), c)
    for tool in tools:
        if tool.wrap_graph:
            compiled.call = tool.wrap_graph(compiled, compiled.call)
    COMPILED.append(compiled)
    return compiled


def first_call_falls_back(call: Callable, c: GraphCompile) -> Callable:
    """A boxed call whose first run, if the generated code raises (an ATen call refusing a layout the graph gives
    it, a kernel bug), runs the graph eagerly instead, then and on every later call, with a note, as a failure at
    compile time does: a compile eager runs never fails. Later calls of code that ran once are not guarded."""
    state: list[Callable] = []

    def run(args):
        if state:
            return state[0](args)
        kept = list(args)  # (a boxed call clears its list; the lifted constants are appended inside `call`)
        try:
            out = call(args)
        except Exception as e:  # noqa: BLE001 (any failure of ours: eager runs it, or raises eager's own error)
            log.debug("kernel-lens: %s: first call failed", c.graph_id, exc_info=True)
            note_runs_eagerly(c.graph_id, c.debug, failure_text("its generated code failed at its first call", e),
                              c.notes)
            state.append(with_constants(_eager(c.gm), c.consts))
            _forget_output_code(c)
            return state[0](kept)
        state.append(call)
        return out

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def _forget_output_code(c: GraphCompile) -> None:
    """Remove code that failed from the cache of output code, so that no warm start (compiler/frontend/graph_cache.py's
    entries name the file) loads it again: that compile then fails the same way, here, and runs eagerly."""
    path = getattr(c.module, "__file__", None)
    if path:
        with contextlib.suppress(OSError):
            os.remove(path)


def _write_graph(debug: DebugDir, c: GraphCompile, example_inputs: list) -> None:
    """The graph the stages start from: as text, as a runnable repro, and its size symbols."""
    debug.fx_graph_readable(c.readable.text)
    debug.fx_graph_runnable(runnable_graph_code(c.gm, input_specs(example_inputs),
                                                f"{c.graph_id} ({c.kind}) of a Kernel Lens run"))
    debug.fx_graph_transformed(c.readable.text)
    _write_symbols(debug, c.gm)


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


def _eager(gm: torch.fx.GraphModule) -> Callable:
    def call(args):
        out = gm(*args)
        args.clear()
        return out

    call._boxed_call = True  # type: ignore[attr-defined]
    return call


def failure_text(what: str, e: BaseException) -> str:
    """`what: ErrorType: message` on one line, cut at 300 characters (the eager note of a failed step)."""
    text = " ".join(str(e).split())
    return f"{what}: {type(e).__name__}: {text[:300]}"


def _eager_graph(c: GraphCompile, why: str) -> CompiledGraph:
    """A graph that runs as its FX graph, op by op (ATen), with the reason logged and in notes.txt."""
    note_runs_eagerly(c.graph_id, c.debug, why, c.notes)
    return CompiledGraph(c.graph_id, c.readable, None, None, c.debug, with_constants(_eager(c.gm), c.consts))


def note_runs_eagerly(graph_id: str, debug: DebugDir | None, why: str, notes: list[str] = ()) -> None:
    """The log line and the debug note of a graph that runs eagerly instead of as generated code."""
    log.warning("kernel-lens: %s runs eagerly: %s", graph_id, why)
    EAGER.append((graph_id, why))
    if debug:
        debug.why(decisions.eager_graph(graph_id, why))
        debug.notes([*notes, EagerNote(graph_id, why).to_line()])


def compile_graph(gm: torch.fx.GraphModule, example_inputs, kind: str = "inference") -> Callable:
    """AOTAutograd's compiler hook: a boxed callable running `gm` with generated kernels."""
    return compile_to_graph(gm, example_inputs, kind).call


def compile_for_cache(gm: torch.fx.GraphModule, example_inputs, kind: str) -> tuple:
    """AOTAutograd's compiler hook under compiler/frontend/aot_cache.py: (the boxed call, the output code's text or
    None when the graph runs eagerly, its lifted constants)."""
    compiled = compile_to_graph(gm, example_inputs, kind)
    return compiled.call, compiled.code.text if compiled.code is not None else None, compiled.constants


def compile_quietly(gm: torch.fx.GraphModule, example_inputs) -> Callable:
    """Compile without a debug directory or a graph number (instrumented or minified graphs)."""
    global _quiet
    old, was_quiet = config.debug, _quiet
    config.debug, _quiet = False, True
    try:
        return compile_graph_module(gm, example_inputs)
    finally:
        config.debug, _quiet = old, was_quiet


def compile_graph_module(gm: torch.fx.GraphModule, example_inputs) -> Callable:
    """Compile an aten-level GraphModule directly (repro scripts, minifier, accuracy checks)."""
    if any("val" not in n.meta for n in gm.graph.nodes if n.op != "output"):
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.passes.fake_tensor_prop import FakeTensorProp
        FakeTensorProp(gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*example_inputs)
    return compile_graph(gm, example_inputs)
