"""The index's data model: runs → graphs → kernels → generated lines → FX nodes → source locations."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .parsers.accuracy import AccuracyReport
from .parsers.compile_error import CompileError
from .parsers.profile import GraphProfile


@dataclass(frozen=True)
class SourceLocation:
    """A user source line (file is an absolute, normalised path; line is 1-based)."""

    file: str
    line: int
    function: str = ""
    code: str = ""


@dataclass
class FxNode:
    name: str
    target: str
    readable_line: int | None
    source: SourceLocation | None
    frames: list[SourceLocation] = field(default_factory=list)


@dataclass
class KernelLine:
    """One generated line of output_code.py (1-based) and the FX nodes it computes."""

    line: int
    nodes: list[str]


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


@dataclass
class Graph:
    id: str
    path: Path
    run_id: str
    status: str = "ok"
    nodes: dict[str, FxNode] = field(default_factory=dict)
    kernels: list[Kernel] = field(default_factory=list)
    output_code_lines: list[str] = field(default_factory=list)
    compile_error: CompileError | None = None
    accuracy: AccuracyReport | None = None
    profile: GraphProfile | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def output_code(self) -> Path:
        return self.path / "output_code.py"

    @property
    def readable(self) -> Path:
        return self.path / "fx_graph_readable.py"

    def code_line(self, line: int) -> str:
        return self.output_code_lines[line - 1] if 0 < line <= len(self.output_code_lines) else ""

    def kernel_source(self, kernel: Kernel) -> str:
        return "\n".join(self.output_code_lines[kernel.start_line - 1:kernel.end_line])


@dataclass
class Run:
    id: str
    path: Path
    kind: str  # lens | inductor
    time: datetime
    graphs: list[Graph] = field(default_factory=list)
    incomplete: bool = False  # a file looked half-written: the watcher retries

    @property
    def kernel_count(self) -> int:
        return sum(len(g.kernels) for g in self.graphs)

    def problems(self) -> list[str]:
        return [p for g in self.graphs for p in g.problems]
