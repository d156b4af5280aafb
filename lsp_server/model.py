"""The index's data model: runs → graphs → kernels → generated lines → FX nodes → source locations, and
what structured traces say about the user's functions (TraceFacts). The parsed records the index holds as they
were read (a profile, a why-record, a trace finding…) are re-exported here: features import them from here."""
from __future__ import annotations

import os
import re
from typing import Any
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from lens_format.accuracy import AccuracyReport
from lens_format.compile_error import CompileError
from lens_format.jsonio import SourceRef
from lens_format.kernel_map import KernelArg
from lens_format.kernel_plans import KernelPlanRecord
from lens_format.notes import GraphNotes
from lens_format.profile import GraphProfile
from lens_format.run_record import rank_label
from lens_format.symbols import ShapeSymbol
from lens_format.why import WhyRecord
from lsp_server.parsers.output_code import CodeLoop
from lsp_server.parsers.torch_trace.dynamo_guards import DynamoGuard
from lsp_server.parsers.torch_trace.findings import TraceDiagnostic
from lsp_server.parsers.torch_trace.guard_words import SizeGuard

# A user source line: the format's one location type; in the index `file` is an absolute, normalised path.
SourceLocation = SourceRef


def normalize_path(file: str) -> str:
    """A path as the index keys files: absolute, normalised."""
    return os.path.normpath(os.path.abspath(file))


READABLE_GRAPH, TRANSFORMED_GRAPH = "fx_graph_readable.py", "fx_graph_transformed.py"  # before/after post-grad


@dataclass
class FxNode:
    name: str
    target: str
    readable_line: int | None  # its statement's line in `graph_file`
    source: SourceLocation | None
    frames: list[SourceLocation] = field(default_factory=list)
    args: list[str] = field(default_factory=list)  # the names its call reads (fx_graph_readable.py)
    graph_file: str = READABLE_GRAPH  # TRANSFORMED_GRAPH: a node only Inductor's post-grad graph has


@dataclass
class KernelLine:
    """One generated line of output_code.py (1-based) and the FX nodes it computes."""

    line: int
    nodes: list[str]
    one_of: bool = False  # the line computes one of `nodes`: the compiler's records do not say which


@dataclass
class Kernel:
    name: str
    kind: str  # pointwise | reduction | persistent_reduction | extern | template
    language: str  # cpp | triton | python (an extern call)
    start_line: int
    end_line: int
    nodes: list[str]
    lines: list[KernelLine] = field(default_factory=list)
    launch_lines: list[int] = field(default_factory=list)
    time_ms: float | None = None
    percent: float | None = None
    calls: int | None = None
    loops: list[CodeLoop] = field(default_factory=list)  # a C++ kernel's braced `for` loops
    args: list[KernelArg] = field(default_factory=list)  # kernel_map.json's arguments: role, dtype, shape (ours)
    plans: list[KernelPlanRecord] = field(default_factory=list)  # kernel_plans.json: generic plan, then variants'
    gpu: Any = None  # loading.triton_kernels.KernelGpu: Triton cache entries, the launched one, autotuning (GPU runs)
    handle: int | None = None  # Inductor's provenance debug handle of an extern call (`extern_kernels.addmm:1`)

    def loops_around(self, line: int) -> list[int]:
        """The header lines of the kernel's `for` loops whose body holds `line`."""
        return [loop.header for loop in self.loops if loop.opened < line <= loop.last]


@dataclass
class Graph:
    id: str
    path: Path
    run_id: str
    status: str = "ok"  # ok | compile_error | accuracy_error | eager (notes.txt: no generated code)
    nodes: dict[str, FxNode] = field(default_factory=dict)
    kernels: list[Kernel] = field(default_factory=list)
    output_code_lines: list[str] = field(default_factory=list)
    compile_error: CompileError | None = None
    accuracy: AccuracyReport | None = None
    profile: GraphProfile | None = None
    problems: list[str] = field(default_factory=list)
    not_vectorized: dict[int, list[str]] = field(default_factory=dict)  # output_code line -> g++'s reasons
    direction: str | None = None  # forward | backward | inference (AOTAutograd's graph), when known
    notes: GraphNotes = field(default_factory=GraphNotes)  # notes.txt: ATen fallbacks, eager graphs
    why: list[WhyRecord] = field(default_factory=list)  # why.json (else notes.txt), g++'s scalar loops, Inductor's
    config: dict[str, object] = field(default_factory=dict)  # why.json: compiler.config settings not at their default
    symbols: list[ShapeSymbol] = field(default_factory=list)  # symbols.json: Dynamo's size symbols
    callers_recorded: bool = False  # the nodes' outer frames are known (ours; Inductor's logged kernel stacks)

    @property
    def eager_reason(self) -> str | None:
        """Why the graph runs eagerly (no generated code), when it does."""
        return self.notes.eager.reason if self.notes.eager is not None else None

    @property
    def output_code(self) -> Path:
        return self.path / "output_code.py"

    @property
    def readable(self) -> Path:
        return self.path / READABLE_GRAPH

    def node_file(self, node: FxNode) -> Path:
        """The graph file holding the node's statement (the post-grad graph's, for a node only it has)."""
        return self.path / node.graph_file

    def code_line(self, line: int) -> str:
        return self.output_code_lines[line - 1] if 0 < line <= len(self.output_code_lines) else ""

    def kernel_source(self, kernel: Kernel) -> str:
        return "\n".join(self.output_code_lines[kernel.start_line - 1:kernel.end_line])


def compile_order(graph_id: str) -> tuple[int, ...]:
    """graph_2 < graph_10; Inductor's model__0_inference_0.0 < model__1_inference_1.1."""
    return tuple(int(number) for number in re.findall(r"\d+", graph_id))


@dataclass
class Run:
    id: str
    path: Path
    kind: str  # lens | inductor | trace (graphs written out of a structured-trace log)
    time: datetime
    graphs: list[Graph] = field(default_factory=list)
    incomplete: bool = False  # a file looked half-written: the watcher retries
    pid: int | None = None  # the process that wrote it (a trace run of a process with a debug dir yields to it)
    rank: int | None = None  # lens/run.json: its rank in a distributed job (DDP, FSDP), None outside one
    world_size: int | None = None
    run_problems: list[str] = field(default_factory=list)  # the run's own files (a malformed lens/run.json)

    @property
    def kernel_count(self) -> int:
        return sum(len(g.kernels) for g in self.graphs)

    @property
    def rank_label(self) -> str:
        """"rank 1 of 2" for a run of a distributed job, else ""."""
        return rank_label(self.rank, self.world_size)

    def problems(self) -> list[str]:
        return self.run_problems + [p for g in self.graphs for p in g.problems]


@dataclass(frozen=True)
class TraceFunction:
    """A user function's compiles on one rank, as a structured trace reports them (a snapshot)."""

    file: str  # normalised path
    name: str
    def_line: int  # 1-based, the code object's first line
    rank: int | None
    frames: int
    graphs: int
    ops: int
    guards: int
    recompiles: int
    graph_breaks: int
    failures: int
    compile_time_s: float
    lens: str  # e.g. "2 graphs · 5 ops · 1 graph break · recompiled 1× · 0.6 s compile"
    failed_guards: tuple[str, ...] = ()  # "0/0: size mismatch at index 0. expected 10, actual 12"


@dataclass(frozen=True)
class CompileGuard:
    """One guard Dynamo installed for a compile, and the later compiles of its frame whose recompile reason quotes
    it: it failed on their call, and Dynamo recompiled as them."""

    guard: DynamoGuard
    failed_for: tuple[str, ...] = ()


@dataclass(frozen=True)
class RecompileCause:
    """One reason a compile is a recompile: the earlier compile (cache entry) whose guard failed, the failure in
    plain words, and that guard's code (None where the entry's guards are not in the trace or none matches)."""

    cache_entry: str | None
    words: str
    guard: str | None


@dataclass(frozen=True)
class CompileFact:
    """One Dynamo compile of a user frame, as a structured trace reports it (a snapshot for the compiles picker)."""

    file: str  # normalised path of the compiled frame
    function: str
    def_line: int
    rank: int | None
    compile_id: str  # "frame/compile", e.g. "0/1" for the frame's first recompile
    call_file: str | None  # where the compiled frame was called from (the stack's next frame out)
    call_line: int | None
    ops: int | None
    guards: int | None
    compile_time_s: float | None
    status: str  # compiled | failed | no graph
    graph_breaks: int
    recompile_reasons: tuple[str, ...] = ()  # plain words (parsers/torch_trace/guard_words.py)
    failed_guards: tuple[str, ...] = ()  # the same guards as Dynamo wrote them
    config: tuple[tuple[str, object], ...] = ()  # torch.compiler.config's set values (compilation_metrics)
    breaks: tuple[tuple[str, int, str], ...] = ()  # (file, line, reason) of each graph break the compile hit
    guard_list: tuple[CompileGuard, ...] = ()  # the guards themselves (dynamo_cpp_guards_str), in Dynamo's order
    causes: tuple[RecompileCause, ...] = ()  # recompile_reasons with the cache entry and the guard each quotes
    size_guards: tuple[SizeGuard, ...] = ()  # the failed guards that specialized a parameter's size (mark_dynamic)


@dataclass
class TraceFacts:
    """What the current structured-trace runs say: per-function figures and findings on user lines.

    For each user file only the newest trace run that compiled it counts, so a newer run clears old findings.
    """

    functions: list[TraceFunction] = field(default_factory=list)
    findings: list[TraceDiagnostic] = field(default_factory=list)  # file paths normalised
    compiles: list[CompileFact] = field(default_factory=list)
    line_texts: dict[tuple[str, int], str] = field(default_factory=dict)  # (file, line) -> its text (stack frames')
    logs: int = 0
    skipped_records: int = 0

    def functions_in(self, file: str) -> list[TraceFunction]:
        return [f for f in self.functions if f.file == file]

    def findings_in(self, file: str) -> list[TraceDiagnostic]:
        return [d for d in self.findings if d.file == file]
