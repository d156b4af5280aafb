"""The results the server's `workspace/executeCommand` handlers answer with (0-based lines, file URIs), as
TypedDicts: the one description of the wire format the extension's `common/protocol.ts` is generated from
(`python -m lsp_server.protocol_ts --write`; tests/lsp_server/test_protocol_ts.py fails when either side changes
alone). `Annotated[..., "words"]` carries a field's doc comment. The GPU commands' answers (Triton chain, kernels at a
line, benchmark one kernel) are in protocol_gpu.py, which builds on this module; protocol_ts.py joins the two."""
from __future__ import annotations

from typing import Annotated, Literal, NotRequired, TypedDict, Union

SENT = "Always sent; optional here, where the extension does not read it."
RunKind = Literal["lens", "inductor"]
KernelKind = Union[Literal["pointwise", "reduction", "persistent_reduction", "extern", "unknown"], str]
JobKind = Literal["compile", "profile", "check-accuracy"]


class RunSummary(TypedDict):
    id: str
    path: str
    kind: RunKind
    time: str
    graphs: int
    kernels: int
    selected: bool
    rank: NotRequired[Annotated[int, "Its rank in a distributed job (lens/run.json); absent outside one."]]
    world_size: NotRequired[int]
    rank_label: NotRequired[Annotated[str, "\"rank 0 of 2\": how the editor names the run's rank."]]
    diverges: NotRequired[Annotated[str, "How the job's other ranks' runs differ from this one (\"rank 1 of 2: 4 "
                                         "graphs, rank 0 of 2: 2\"); absent where the ranks agree."]]


class SelectRunResult(TypedDict):
    """`kernelLens.selectRun` ({run_id} or a run id; null: the newest run answers again)."""

    selected: str | None
    error: NotRequired[str]


class KernelLocation(TypedDict):
    name: str
    kind: KernelKind
    graph_id: str
    run_id: str
    uri: str
    start_line: int
    end_line: int
    line: int
    time_ms: float | None
    rank_label: NotRequired[Annotated[str, "The run's rank in a distributed job (\"rank 0 of 2\"); absent outside one."]]


class SourceLocation(TypedDict):
    uri: str
    line: int


class ProfiledKernel(TypedDict):
    name: str
    kind: KernelKind
    calls: int
    total_ms: float
    percent: float
    uri: str
    line: int
    source: SourceLocation | None


class KindShare(TypedDict):
    kind: KernelKind
    total_ms: float
    percent: float


class GraphProfile(TypedDict):
    graph_id: str
    eager_ms: float | None
    compiled_ms: float | None
    speedup: float | None
    busy_percent: Annotated[NotRequired[float | None], "Percent of the wall time the device was busy running "
                                                        "kernels (real Inductor `-p` profiles), else null."]
    profiled_ms: Annotated[NotRequired[float | None], "One iteration under the profiler: kernel times and shares "
                                                       "are of this (compiled_ms runs without it)."]
    device: NotRequired[Union[Literal["cuda", "cpu"], str]]
    categories: list[KindShare]
    kernels: list[ProfiledKernel]


class RunProfile(TypedDict):
    run_id: str
    rank_label: NotRequired[Annotated[str, "The run's rank in a distributed job (\"rank 0 of 2\"); absent outside one."]]
    graphs: list[GraphProfile]
    lines: Annotated[NotRequired[list[CostlyLine]], "The run's source lines, costliest first (share of one "
                                                    "profiled iteration)."]


class CostlyLine(TypedDict):
    """A source line and what it costs: each kernel's time split evenly over the source lines it computes."""

    uri: str
    file: str
    line: int
    code: str
    percent: float
    ms: float | None
    kernels: list[str]


class LineLink(TypedDict):
    """One source line (0-based) and the generated lines (0-based) it became; lines of one band share a colour."""

    source_line: int
    generated_lines: list[int]
    band: int


class LineRange(TypedDict):
    """Lines of a file, 0-based and inclusive."""

    start: int
    end: int


class GraphLink(TypedDict):
    graph_id: str
    uri: str


class LinkedLines(TypedDict):
    """`kernelLens.linkedLines` ({uri, graph_id?}): a user file linked with one graph's output_code.py."""

    run_id: str
    graph_id: str
    source_uri: str
    generated_uri: str
    links: list[LineLink]
    prelude: Annotated[LineRange | None, "The C++ prelude before the first kernel (0-based, inclusive), folded by "
                                         "the kernel view."]
    graphs: list[GraphLink]


class LineCostKernel(TypedDict):
    name: str
    graph_id: str
    lines_sharing: int
    percent: float | None
    ms: float | None


class LineCost(TypedDict):
    line: int
    percent: float | None
    ms: float | None
    kernels: list[LineCostKernel]


class LineCosts(TypedDict):
    """`kernelLens.lineCosts` ({uri}): each source line's share and ms per iteration, costliest first."""

    run_id: str
    uri: str
    lines: list[LineCost]
    measures: str


class ReindexResult(TypedDict):
    runs: int


class JobResult(TypedDict):
    exit_code: int
    output_tail: str


class KernelSpan(TypedDict):
    """Where one kernel of a diffed run is: its lines (0-based, inclusive) in that run's output_code.py."""

    name: str
    uri: str
    start_line: int
    end_line: int


KernelChange = Literal["same", "code_changed", "split", "merged", "regrouped", "nodes_changed", "added", "removed"]


class TimePair(TypedDict):
    a: float | None
    b: float | None


class SourceRef(TypedDict):
    """A user source line as the debug directory writes it (1-based)."""

    file: str
    line: int
    function: str
    code: str


class DiffNode(TypedDict):
    """An FX node only one run has."""

    name: str
    target: str
    source: SourceRef | None


class KernelDiffNode(TypedDict):
    """A node of a kernel group: its FX name in each run (null where absent) and which kernel holds it."""

    target: str
    source: SourceRef | None
    a: str | None
    b: str | None
    a_kernel: str | None
    b_kernel: str | None


class KernelDiffEntry(TypedDict):
    """One group of kernels sharing FX nodes across the two runs (`kernel-lens diff --json`)."""

    change: Union[KernelChange, str]
    a: list[str]
    b: list[str]
    nodes: Annotated[NotRequired[list[KernelDiffNode]], SENT]
    code_diff: str | None
    time_ms: TimePair | None
    a_locations: list[KernelSpan]
    b_locations: list[KernelSpan]


class OutputsComparison(TypedDict):
    status: Union[Literal["same", "changed", "inputs_differ", "not_saved", "not_compared"], str]
    max_abs_error: float | None
    max_rel_error: float | None


class GraphDiff(TypedDict):
    a: str | None
    b: str | None
    a_dir: Annotated[NotRequired[str | None], SENT]
    b_dir: NotRequired[str | None]
    change: Union[Literal["same", "changed", "added", "removed"], str]
    nodes_added: NotRequired[list[DiffNode]]
    nodes_removed: NotRequired[list[DiffNode]]
    kernels: list[KernelDiffEntry]
    time_ms: NotRequired[TimePair | None]
    outputs: NotRequired[OutputsComparison]


class RunDiff(TypedDict):
    """`kernelLens.diffRuns` ({a, b} run ids): the diff, or `{error}`."""

    version: Annotated[NotRequired[int], SENT]
    a: Annotated[NotRequired[str], "The runs' folders."]
    b: NotRequired[str]
    changed: bool
    a_run: str
    b_run: str
    summary: dict[str, int]
    graphs: list[GraphDiff]


class CommandError(TypedDict):
    error: str


RunDiffResult = Union[RunDiff, CommandError]


class CompileGuard(TypedDict):
    """One guard Dynamo installed for a compile (the trace's `dynamo_cpp_guards_str`), as Dynamo wrote it."""

    kind: Annotated[str, "`TENSOR_MATCH`, `EQUALS_MATCH`, `LAMBDA_GUARD`..."]
    code: str
    line: Annotated[int | None, "The compiled function's file's line the guard came from; null for those every "
                                "compile has."]
    failed_for: Annotated[list[str], "The later compiles whose recompile reason quotes this guard: it failed."]


class RecompileCause(TypedDict):
    """Why a compile is a recompile: the earlier compile whose guard failed, in words, and that guard."""

    cache_entry: str | None
    words: str
    guard: Annotated[str | None, "The failed guard's code; null where the trace does not show it."]


class CompileSummary(TypedDict):
    """One Dynamo compile (`kernelLens.listCompiles` ({uri?})): what triggered it and why it recompiled."""

    function: str
    compile_id: str
    rank: int | None
    uri: str
    def_line: int
    call_site: SourceLocation | None
    ops: int | None
    guards: int | None
    compile_time_s: float | None
    status: Literal["compiled", "failed", "no graph", "ran eagerly", "compiled, differs from eager"]
    graph_breaks: int
    recompile_reasons: list[str]
    guard_list: Annotated[list[CompileGuard], "The guards themselves, in Dynamo's order (empty: not in a trace)."]
    recompile_causes: list[RecompileCause]
    origin: Annotated[NotRequired[str], "`TORCH_TRACE`, or the debug-directory run the graph came from."]
    config: Annotated[NotRequired[dict[str, object]], "The settings not at their default, by full name."]
    compile_call: Annotated[NotRequired[SourceLocation | None], "The `torch.compile` that wrapped the function."]


class GraphBreakSummary(TypedDict):
    """One graph break of the structured traces, once per place and reason."""

    reason: str
    uri: str
    line: int
    compiles: int
    frames: int
    ranks: list[int]
    functions: list[str]


class GraphBreaks(TypedDict):
    """`kernelLens.listGraphBreaks` ({uri?}): most compiles first."""

    graph_breaks: list[GraphBreakSummary]


# What protocol.ts declares, in its order: type aliases by name, then interfaces (protocol_gpu.py's follow).
ALIASES = {"RunKind": RunKind, "KernelKind": KernelKind, "JobKind": JobKind, "KernelChange": KernelChange,
           "RunDiffResult": RunDiffResult}
DECLARATIONS = ["RunKind", "KernelKind", "JobKind", RunSummary, SelectRunResult, KernelLocation, SourceLocation, ProfiledKernel,
                KindShare, GraphProfile, RunProfile, CostlyLine, LineLink, LineRange, GraphLink, LinkedLines,
                LineCostKernel, LineCost, LineCosts, ReindexResult, JobResult, KernelSpan, "KernelChange", TimePair,
                SourceRef, DiffNode, KernelDiffNode, KernelDiffEntry, OutputsComparison, GraphDiff, RunDiff, CommandError, "RunDiffResult", CompileGuard,
                RecompileCause, CompileSummary,
                GraphBreakSummary, GraphBreaks]

# executeCommand ID -> what its handler answers (None where there is nothing to say)
COMMANDS: dict[str, object] = {
    "kernelLens.reindex": ReindexResult, "kernelLens.listRuns": list[RunSummary],
    "kernelLens.selectRun": SelectRunResult, "kernelLens.kernelsAt": list[KernelLocation],
    "kernelLens.getProfile": Union[RunProfile, None], "kernelLens.diffRuns": RunDiffResult,
    "kernelLens.runJob": JobResult, "kernelLens.profileInductor": JobResult,
    "kernelLens.linkedLines": Union[LinkedLines, None], "kernelLens.lineCosts": Union[LineCosts, None],
    "kernelLens.listCompiles": list[CompileSummary], "kernelLens.listGraphBreaks": GraphBreaks}
