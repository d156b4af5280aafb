"""Builds one index `Graph` from a graph folder's parsed files: ours (`lens/`) or real Inductor's."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from lens_format.compile_error import CompileError
from lens_format.jsonio import SourceRef
from lens_format.kernel_map import KernelMap
from lens_format.kernel_plans import KernelPlansFile
from lens_format.profile import GraphProfile
from lsp_server.loading.benchmark_profile import benchmark_profile
from lsp_server.loading.gpu_profile import attach_trace_profile
from lsp_server.loading.kernel_stacks import apply_kernel_stacks
from lsp_server.loading.post_grad_nodes import add_post_grad_nodes
from lsp_server.loading.triton_kernels import attach_triton
from lsp_server.loading import cpp_dataflow, triton_dataflow
from lsp_server.loading.statement_flow import launch_arguments
from lsp_server.loading.why_records import graph_why
from lsp_server.model import READABLE_GRAPH, FxNode, Graph, Kernel, KernelLine, SourceLocation, normalize_path
from lsp_server.parsers import PARSERS, ParseError, UnsupportedVersionError
from lsp_server.parsers.fx_graph_readable import ReadableGraph, op_name
from lsp_server.parsers.inductor_benchmark import (
    BENCHMARK_OUTPUT_FILE,
    BENCHMARK_TRACE_FILE,
    BenchmarkOutput,
    ChromeTrace,
)
from lsp_server.parsers.output_code import CodeKernel, OutputCode, cpp_loops
from lsp_server.parsers.provenance import KERNEL_STACKS_FILE, ProvenanceMap
from lsp_server.parsers.vectorization import plain_reasons

# Kernel name prefix → kind (Inductor names kernels by category); None: decide from the C++ body.
KIND_BY_PREFIX: list[tuple[str, str | None]] = [
    ("triton_poi_", "pointwise"), ("triton_red_", "reduction"), ("triton_per_", "persistent_reduction"),
    ("triton_tem_", "template"), ("extern_kernels.", "extern"), ("cpp_", None),
]
REDUCTION_MARKERS = ("tmp_acc", "reduce")


def to_location(ref: SourceRef | None) -> SourceLocation | None:
    return None if ref is None else SourceLocation(normalize_path(ref.file), ref.line, ref.function, ref.code)


class GraphFiles:
    """Parses a graph folder's files on demand; records problems instead of raising."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.incomplete = False

    def parse(self, name: str, folder: Path | None = None) -> Any:
        path = (folder or self.graph.path) / name
        if not path.is_file():
            return None
        parser: Callable[[Path], Any] = PARSERS[name]
        try:
            return parser(path)
        except UnsupportedVersionError as exc:
            self.graph.problems.append(str(exc))
        except ParseError as exc:
            self.graph.problems.append(str(exc))
            self.incomplete = True  # most likely caught mid-write; the watcher retries
        except (OSError, UnicodeError, ValueError, RecursionError) as exc:
            self.graph.problems.append(f"{path}: {exc}")
            self.incomplete = True
        return None


def build_graph(graph: Graph) -> bool:
    """Fill `graph` from its folder; returns True when some file looked half-written."""
    files = GraphFiles(graph)
    readable: ReadableGraph | None = files.parse("fx_graph_readable.py")
    output: OutputCode | None = files.parse("output_code.py")
    kernel_map: KernelMap | None = files.parse("kernel_map.json")
    graph.nodes = nodes_from_readable(readable)
    if output is not None:
        graph.output_code_lines = output.lines
    if kernel_map is not None:
        graph.status = kernel_map.status
        graph.direction = kernel_map.graph_kind
        merge_kernel_map_nodes(graph, kernel_map)
        graph.callers_recorded = True  # kernel_map.json records each node's callers
        graph.kernels = kernels_from_kernel_map(kernel_map, output, readable_lines(graph))
    elif output is not None:
        provenance: ProvenanceMap | None = files.parse("inductor_provenance_tracking_node_mappings.json")
        add_post_grad_nodes(graph, files.parse("fx_graph_transformed.py"),
                            [f for code in output.kernels for f in code.fragment], provenance)
        graph.kernels = kernels_from_output_code(output, provenance, graph)
        apply_kernel_stacks(graph, files.parse(KERNEL_STACKS_FILE))  # a trace run's copy of its log's record
    plans: KernelPlansFile | None = files.parse("kernel_plans.json") if kernel_map is not None else None
    for kernel in graph.kernels if plans is not None else ():
        kernel.plans = plans.plans_of(kernel.name)
    for kernel in graph.kernels:  # the loops around a line g++ left scalar (hover), found once here
        if kernel.language == "cpp":
            kernel.loops = cpp_loops(graph.output_code_lines, kernel.start_line, kernel.end_line)
    if graph.direction is None:  # real Inductor: model__0_backward_3.1
        found = re.search(r"_(forward|backward|inference)_", graph.path.name)
        graph.direction = found.group(1) if found else None
    attach_compile_error(graph, files.parse("compile_error.json"))
    graph.accuracy = files.parse("accuracy.json")
    graph.not_vectorized = innermost_misses(graph, files.parse("vectorization.txt") or {})
    graph.notes = files.parse("notes.txt") or graph.notes
    graph.symbols = files.parse("symbols.json") or []
    why = files.parse("why.json")
    ours = kernel_map is not None or graph.notes.eager is not None
    graph.why = graph_why(graph, why, ours, None if ours else files.parse("ir_post_fusion.txt"))
    graph.config = dict(why.config) if why is not None else {}
    if graph.eager_reason is not None and not graph.kernels and graph.status == "ok":
        graph.status = "eager"
    graph.profile = files.parse("profile.json") or profile_from_benchmark(files)
    apply_profile(graph)
    attach_trace_profile(graph)  # the user's own torch.profiler trace, where one times this graph's kernels
    attach_triton(graph)  # Triton cache entries kept beside the run, autotuning logged beside the program
    return files.incomplete


def innermost_misses(graph: Graph, reported: dict[int, list[str]]) -> dict[int, list[str]]:
    """The loops g++ left scalar that carry the elements: vectorization.txt's lines (a `for`, its `omp simd`
    pragma, a statement inside) → the innermost loop around them → its reasons in plain words. An outer loop, a
    loop holding another, or a buffer's zero-filling (`__builtin_memset`) is no miss: the hover never says so."""
    misses: dict[int, list[str]] = {}
    for line, reasons in sorted(reported.items()):
        kernel = next((k for k in graph.kernels if k.start_line <= line <= k.end_line and k.loops), None)
        if kernel is None:
            continue
        text = graph.code_line(line).strip()
        at = line + 1 if text.startswith("#pragma") else line
        around = [loop for loop in kernel.loops if loop.header == at or loop.opened < at <= loop.last]
        if not around:
            continue
        loop = min(around, key=lambda l: l.last - l.header)  # the innermost holding the line
        if any(other is not loop and loop.opened < other.header <= loop.last for other in kernel.loops):
            continue  # it holds another loop: not the one carrying the elements
        for reason in plain_reasons(reasons):
            if reason not in misses.setdefault(loop.header, []):
                misses[loop.header].append(reason)
    return {line: reasons for line, reasons in misses.items() if reasons}


def profile_from_benchmark(files: GraphFiles) -> GraphProfile | None:
    """Real Inductor: `python output_code.py -p` output kept beside output_code.py."""
    output: BenchmarkOutput | None = files.parse(BENCHMARK_OUTPUT_FILE)
    trace: ChromeTrace | None = None if output is not None and (output.categories or output.cpu_kernel_rows()) \
        else files.parse(BENCHMARK_TRACE_FILE)
    graph = files.graph
    return benchmark_profile(graph.path / BENCHMARK_OUTPUT_FILE, graph.id, output, trace, graph.kernels)


def attach_compile_error(graph: Graph, error: CompileError | None) -> None:
    graph.compile_error = error
    if error is not None and graph.status == "ok":
        graph.status = "compile_error"


def load_run_level_compile_error(graphs: list[Graph], run_dir: Path, run_id: str) -> bool:
    """`kernel-lens compile` writes compile_error.json beside a real Inductor run's graph folders."""
    for folder in (run_dir, run_dir / "torchinductor", run_dir / "lens"):
        if not (folder / "compile_error.json").is_file():
            continue
        holder = Graph("compile_error", folder, run_id)
        files = GraphFiles(holder)
        error: CompileError | None = files.parse("compile_error.json")
        if error is None:
            return files.incomplete
        target = next((g for g in graphs if g.id == error.graph_id), None)
        if target is None:
            graphs.append(holder)
            target = holder
        attach_compile_error(target, error)
        return False
    return False


def nodes_from_readable(readable: ReadableGraph | None) -> dict[str, FxNode]:
    if readable is None:
        return {}
    nodes = {}
    for node in readable.nodes:
        frames = [loc for ref in node.frames if (loc := to_location(ref)) is not None]
        nodes[node.name] = FxNode(node.name, node.target, node.line, frames[-1] if frames else None, frames,
                                  node.args)
    return nodes


def merge_kernel_map_nodes(graph: Graph, kernel_map: KernelMap) -> None:
    """kernel_map.json is authoritative for lines and sources; the readable file adds outer frames."""
    for mapped in kernel_map.nodes:
        known = graph.nodes.get(mapped.name)
        source = to_location(mapped.source) or (known.source if known else None)
        frames = list(known.frames) if known else []
        if source is not None and source not in frames:
            frames.append(source)
        callers = [loc for ref in mapped.callers if (loc := to_location(ref)) is not None and loc not in frames]
        frames = callers + frames  # outermost first: the lines whose calls reached the node's own line
        line = mapped.readable_line if mapped.readable_line is not None else (known.readable_line if known else None)
        graph.nodes[mapped.name] = FxNode(mapped.name, mapped.target or (known.target if known else ""),
                                          line, source, frames, known.args if known else [])


def readable_lines(graph: Graph) -> dict[int, str]:
    return {n.readable_line: n.name for n in graph.nodes.values()
            if n.readable_line is not None and n.graph_file == READABLE_GRAPH}


def kernels_from_kernel_map(kernel_map: KernelMap, output: OutputCode | None,
                            node_at_line: dict[int, str]) -> list[Kernel]:
    code_kernels = {k.name: k for k in output.kernels} if output else {}
    kernels = []
    for mapped in kernel_map.kernels:
        code = code_kernels.get(mapped.name)
        start = mapped.start_line or (code.start_line if code else 1)
        end = mapped.end_line or (code.end_line if code else start)
        lines = [KernelLine(m.output_code_line, m.nodes) for m in mapped.lines]
        if not lines and code is not None:
            lines = lines_from_fx_marks(code, node_at_line)
        language = "python" if mapped.kind == "extern" else "cpp"
        kernel = Kernel(mapped.name, mapped.kind, language, start, end, mapped.nodes, lines, args=mapped.args or [])
        if output is not None:
            kernel.launch_lines = [l.line for l in output.launches if l.callee == mapped.name]
        kernels.append(kernel)
    return kernels


def lines_from_fx_marks(code: CodeKernel, node_at_line: dict[int, str]) -> list[KernelLine]:
    return [KernelLine(m.statement_line, [node_at_line[m.fx_line]])
            for m in code.fx_marks if m.fx_line in node_at_line]


def kernel_kind(name: str, body: str) -> str:
    for prefix, kind in KIND_BY_PREFIX:
        if name.startswith(prefix):
            if kind is not None:
                return kind
            break
    return "reduction" if any(marker in body for marker in REDUCTION_MARKERS) else "pointwise"


def kernels_from_output_code(output: OutputCode, provenance: ProvenanceMap | None, graph: Graph) -> list[Kernel]:
    """Real Inductor: kernel → nodes from provenance, else the source-node comments, else the name; extern and
    fallback calls (`extern_kernels.mm`, `torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default`) are
    kernels on their own nodes; then each generated kernel's statements → nodes (its data flow), in launch order."""
    node_at_line = readable_lines(graph)
    kernels, codes = [], {}
    for code in output.kernels:
        body = "\n".join(output.lines[code.start_line:code.end_line - 1])
        nodes = kernel_nodes(code.name, code.source_nodes, provenance, graph)
        kernel = Kernel(code.name, kernel_kind(code.name, body), code.flavor, code.start_line, code.end_line, nodes)
        kernels.append(kernel)
        codes[code.name] = code
    by_name = {k.name: k for k in kernels}
    computed: dict[int, frozenset[str]] = {}  # an extern launch's line -> the nodes its provenance says it computes
    for launch in output.launches:
        kernel = by_name.get(launch.callee)
        if kernel is None and launch.callee.startswith(("extern_kernels.", "torch.ops.")):
            nodes = extern_nodes(launch.callee, launch.handle, launch.source_nodes, provenance, graph)
            kernel = Kernel(launch.callee, "extern", "python", launch.line, launch.line, nodes, handle=launch.handle)
            kernels.append(kernel)
            exact = provenance_exact(launch.callee, launch.handle, provenance)
            if exact:
                computed[launch.line] = frozenset(exact)
        if kernel is not None:
            kernel.launch_lines.append(launch.line)
    drop_extern_nodes(kernels, graph)
    kernels.sort(key=lambda k: min(k.launch_lines, default=k.start_line))
    buffers = extern_outputs(output, kernels, computed)
    for kernel in kernels:
        code = codes.get(kernel.name)
        if code is not None:
            kernel.lines = lines_from_fx_marks(code, node_at_line) or lines_by_op_name(output, code, kernel, graph,
                                                                                        buffers)
        kernel.lines += [KernelLine(line, list(kernel.nodes)) for line in kernel.launch_lines]
    return kernels


EXTERN_OUT = re.compile(r"\bout=(?P<buffer>buf\d+)|^\s*(?P<assigned>buf\d+)\s*=\s*(?:extern_kernels|torch\.ops)\.")
REUSE = re.compile(r"^\s*(?P<new>buf\d+)\s*=\s*(?P<old>buf\d+)\s*;\s*del\b")


def extern_outputs(output: OutputCode, kernels: list[Kernel],
                   computed: dict[int, frozenset[str]] | None = None) -> dict[str, frozenset[str]]:
    """Buffer -> the nodes an extern or fallback call computed into it (`out=buf1`, `buf1 = torch.ops...`), and
    Inductor's reuses (`buf4 = buf2; del buf2  # reuse`) naming the same values: generated kernels read them.
    `computed`: per launch line, the nodes the provenance names for that very call, even one only the post-grad graph
    has (`mm_default`, an addmm's product that the next kernel's `# Graph fragment:` reads): what the buffer holds."""
    computed = computed or {}
    buffers: dict[str, frozenset[str]] = {}
    externs = {line: k for k in kernels if k.kind == "extern" for line in k.launch_lines}
    for number in range(output.call_line or len(output.lines), len(output.lines) + 1):
        text = output.lines[number - 1]
        reuse = REUSE.match(text)
        if reuse is not None and reuse["old"] in buffers:
            buffers[reuse["new"]] = buffers[reuse["old"]]
        found = EXTERN_OUT.search(text) if number in externs else None
        if found is not None:
            buffers[found["buffer"] or found["assigned"]] = computed.get(number) or frozenset(externs[number].nodes)
    return buffers


def callee_op(callee: str) -> str:
    """`extern_kernels.bmm` → bmm; `torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default` → its op."""
    parts = callee.split(".")
    return parts[3] if callee.startswith("torch.ops.") and len(parts) > 3 else parts[-1]


def drop_extern_nodes(kernels: list[Kernel], graph: Graph) -> None:
    """A node an extern or fallback call computes is that call's, not a generated kernel's: Inductor's provenance
    also lists it for the kernel that computes the call's inputs (an attention mask)."""
    called = {n for k in kernels if k.kind == "extern" for n in k.nodes
              if n in graph.nodes and op_name(graph.nodes[n].target) == callee_op(k.name)}
    for kernel in kernels:
        if kernel.kind != "extern" and called & set(kernel.nodes) and set(kernel.nodes) - called:
            kernel.nodes = [n for n in kernel.nodes if n not in called]
            kernel.lines = [KernelLine(kl.line, [n for n in kl.nodes if n not in called] or kl.nodes)
                            for kl in kernel.lines]


def kernel_nodes(name: str, source_nodes: list[str], provenance: ProvenanceMap | None, graph: Graph) -> list[str]:
    if provenance is not None:
        nodes = [n for n in provenance.nodes_of(name) if n in graph.nodes]
        if nodes:
            return nodes
    nodes = [n for n in source_nodes if n in graph.nodes]
    if nodes:
        return nodes
    ops = set(name.split("_"))  # cpp_fused_maximum_neg_0 → {maximum, neg}
    return [n.name for n in graph.nodes.values() if op_name(n.target) in ops]


def provenance_exact(callee: str, handle: int | None, provenance: ProvenanceMap | None) -> list[str]:
    """The nodes Inductor's provenance names for this one call (its debug handle), as named there."""
    if provenance is None:
        return []
    return [n for e in provenance.kernels if e.kernel == callee and e.handle == handle for n in e.nodes]


def extern_nodes(callee: str, handle: int | None, source_nodes: list[str], provenance: ProvenanceMap | None,
                 graph: Graph) -> list[str]:
    nodes: list[str] = []
    if provenance is not None:
        exact = provenance_exact(callee, handle, provenance)
        nodes = [n for n in exact or provenance.nodes_of(callee) if n in graph.nodes]
    nodes = nodes or [n for n in source_nodes if n in graph.nodes]
    own = [n for n in nodes if op_name(graph.nodes[n].target) == callee_op(callee)]
    return own or nodes  # the call's own node: its origins also list the nodes computing its inputs


STATEMENT_READERS = {"cpp": cpp_dataflow.statement_owners, "triton": triton_dataflow.statement_owners}


def lines_by_op_name(output: OutputCode, code: CodeKernel, kernel: Kernel, graph: Graph,
                     buffers: dict[str, frozenset[str]] | None = None) -> list[KernelLine]:
    """Inductor maps kernels to nodes, not lines: a C++ or Triton body's statements by its data flow (statement_flow:
    one node, or "one of" several where the records do not decide), else a body line to the nodes whose op it calls."""
    nodes = kernel.nodes
    reader = STATEMENT_READERS.get(code.flavor)
    if reader is not None:
        ordered = sorted((graph.nodes[n] for n in nodes if n in graph.nodes),  # post-grad-only nodes last
                         key=lambda n: (n.graph_file != READABLE_GRAPH, n.readable_line or 0))
        body = output.lines[code.start_line:code.end_line - 1]
        launch = output.lines[kernel.launch_lines[0] - 1] if kernel.launch_lines else ""
        # The kernel's `# Graph fragment:` is the post-grad graph: nodes a post-grad pass made (an online softmax's
        # `sub_tensor`) are in no other file, and a node both have may read other nodes there
        fragment = {f.name: (f.name, op_name(f.target), list(f.args)) for f in code.fragment}
        flow_nodes = [fragment.pop(n.name, (n.name, op_name(n.target), n.args)) for n in ordered]
        flow_nodes += list(fragment.values())
        graph_args = {n.name: n.args for n in graph.nodes.values()} | {n: args for n, _, args in flow_nodes}
        found = reader(body, flow_nodes, launch_arguments(launch), buffers, graph_args)
        if found:
            return [KernelLine(code.start_line + 1 + index, names, one_of=len(names) > 1)
                    for index, names in sorted(found.items())]
    patterns = []
    for name in nodes:
        node = graph.nodes.get(name)
        op = op_name(node.target) if node else ""
        if op:
            patterns.append((name, re.compile(rf"(?:\.|::|\b){re.escape(op)}\s*\(")))
    lines = []
    for number in range(code.start_line + 1, code.end_line):
        text = output.lines[number - 1]
        if text.lstrip().startswith(("//", "#")):
            continue
        hit = [name for name, pattern in patterns if pattern.search(text)]
        if hit:
            lines.append(KernelLine(number, hit))
    return lines


def apply_profile(graph: Graph) -> None:
    if graph.profile is None:
        return
    times = {k.name: k for k in graph.profile.kernels}
    for kernel in graph.kernels:
        measured = times.get(kernel.name)
        if measured is not None:
            kernel.time_ms, kernel.percent, kernel.calls = measured.total_ms, measured.percent, measured.calls
