"""The GPU commands' answers (issue 47), as TypedDicts beside protocol.py's: the compiled chain of a Triton kernel
(`kernelLens.tritonChain`), where chains open from a line (`kernelLens.tritonKernelsAt`) and one kernel benchmarked
(`kernelLens.benchmarkKernel`). protocol_ts.py renders these after protocol.py's declarations, in this order."""
from __future__ import annotations

from typing import Annotated, NotRequired, TypedDict, Union

from lsp_server.protocol import CommandError, SourceLocation


class StageLinks(TypedDict):
    uri: str
    lines: list[int]  # 0-based lines of one IR stage file that came from the Triton line


class TritonLine(TypedDict):
    uri: str  # the graph's output_code.py, where Inductor embeds the kernel's file
    line: int
    kernel_file_line: int  # 1-based line of the kernel's own .py file (what the IR's loc records name)
    text: str


class LaunchSetting(TypedDict):
    name: str  # XBLOCK, R0_BLOCK, num_warps, num_stages
    value: str
    origin: Annotated[str, ".best_config | autotune log | only config | kernel source | launch grid | cache entry"]


class TriedConfig(TypedDict):
    config: str  # as Inductor logs it: `XBLOCK: 8, num_warps: 2, num_ctas: 1, num_stages: 1, maxnreg: None`
    ms: float
    registers: Union[int, None]
    spills: Union[int, None]
    chosen: bool
    search: Annotated[str, "autotune (the configs Inductor generated) | coordinate descent (its neighbours, after)"]


class TritonLaunch(TypedDict):
    """The launched config of a Triton kernel and the configs autotuning tried (fastest first)."""
    settings: list[LaunchSetting]
    chosen_by: Annotated[str, "which cache entry launched: only entry | .best_config | coordinate descent | "
                              "logged best config | profiled launch | unknown"]
    tried: list[TriedConfig]


class TritonChain(TypedDict):
    """`kernelLens.tritonChain` ({uri, line}): a Triton kernel's line in any stage (ttir ttgir llir ptx sass) or in
    output_code.py, its Triton line, FX nodes and user line, and every stage's lines from that Triton line."""
    kernel: str
    graph_id: str
    run_id: str
    entry: str  # the Triton cache entry (hash folder)
    stage: str  # triton | ttir | ttgir | llir | ptx | sass: where the asked line is
    line: int
    launch: TritonLaunch
    triton: TritonLine
    nodes: list[str]
    precision: Annotated[str, "line: the Triton line's own FX nodes; kernel: the index maps the line to no node, "
                              "the kernel's nodes (and their first user line) stand in"]
    source: Union[SourceLocation, None]
    stages: dict[str, StageLinks]


class TritonChainStart(TypedDict):
    """A Triton kernel's chain opens on `line` of its graph's output_code.py (`uri`)."""
    kernel: str
    graph_id: str
    run_id: str
    uri: str
    line: int
    ms: Union[float, None]  # the kernel's time per call of its graph, where profiled


class TritonKernelsAt(TypedDict):
    """`kernelLens.tritonKernelsAt` ({uri, line}): the Triton kernels with a kept cache entry that a user's line
    (those computing it, most costly first), a kernel's own file or output_code.py line leads to."""
    kernels: list[TritonChainStart]


class BenchmarkVariant(TypedDict):
    """One timed run of a kernel's standalone module: `default` (as compiled) or `max_autotune` (as
    `mode="max-autotune"` compiles it, run with TORCHINDUCTOR_MAX_AUTOTUNE=1)."""
    variant: str
    ms: Union[float, None]
    gb: Union[float, None]
    gb_per_s: Union[float, None]
    configs_tried: Union[int, None]
    best_config: Union[str, None]
    error: Union[str, None]


class BenchmarkKernelResult(TypedDict):
    """`kernelLens.benchmarkKernel` ({uri, line, maxAutotune?}): the kernel's standalone module timed on this
    machine's GPU, as compiled (`ms`, `gb_per_s`) and, unless maxAutotune is false, as max-autotune compiles it
    (`variants`, side by side); without a GPU, `error` says so and the figures are those recorded beside
    output_code.py (the `-k` line; `variants` from kernel_benchmarks.json)."""
    error: NotRequired[str]
    kernel: NotRequired[str]
    ms: NotRequired[float]
    gb: NotRequired[float]
    gb_per_s: NotRequired[float]
    registers: NotRequired[int | None]
    spills: NotRequired[int | None]
    shared: NotRequired[int | None]
    recorded: NotRequired[bool]
    device: NotRequired[Union[str, None]]
    variants: NotRequired[list[BenchmarkVariant]]


TritonChainResult = Union[TritonChain, CommandError]
TritonKernelsAtResult = Union[TritonKernelsAt, CommandError]

ALIASES = {"TritonChainResult": TritonChainResult, "TritonKernelsAtResult": TritonKernelsAtResult}
DECLARATIONS = [StageLinks, TritonLine, LaunchSetting, TriedConfig, TritonLaunch, TritonChain, "TritonChainResult",
                TritonChainStart, TritonKernelsAt, "TritonKernelsAtResult", BenchmarkVariant, BenchmarkKernelResult]
COMMANDS: dict[str, object] = {
    "kernelLens.tritonChain": TritonChainResult, "kernelLens.benchmarkKernel": BenchmarkKernelResult,
    "kernelLens.tritonKernelsAt": TritonKernelsAtResult}
