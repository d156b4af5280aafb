"""Parses real Inductor's `python output_code.py -p` output (profiler table, per-category kernel tables,
busy / wall / tabulate summary lines) and the Chrome trace it writes, for GPU (Triton) and CPU runs.
Pure text -> dataclasses: unknown or garbled lines are skipped, nothing here raises on content."""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# Where tests/fixtures/inductor_gpu/regenerate.py keeps them, beside output_code.py.
BENCHMARK_OUTPUT_FILE = "benchmark_output.txt"
BENCHMARK_TRACE_FILE = "benchmark_trace.json"

# The columns of `Output for tabulate:` between the benchmark name and busy %, by how many there are
# (torch 2.11 added triton_unknown; older torch had four).
TABULATE_CATEGORIES: dict[int, tuple[str, ...]] = {
    5: ("triton_pointwise", "triton_reduction", "triton_persistent_reduction", "triton_unknown", "unknown"),
    4: ("triton_pointwise", "triton_reduction", "triton_persistent_reduction", "unknown"),
}
TIME_UNITS_US = {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3}
# Chrome-trace events that are kernels: GPU activity, and Inductor's C++ kernels' record functions.
TRACE_DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
CPU_KERNEL = re.compile(r"(?:^|_)cpp_fused_\w+")
# Inductor prints kernel names cut to this many characters in the category tables.
CATEGORY_NAME_LIMIT = 120

NUMBER = r"[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"  # ASCII digits only: float() never refuses it
CATEGORY_HEADER = re.compile(r"^\s*==\s*(?P<category>\w+) category kernels\s*==\s*$")
CATEGORY_COLUMNS = re.compile(r"^\s*Kernel\s+Self (?P<device>\w+) TIME \(ms\)\s+Count\s+Percent\s*$")
RULE = re.compile(r"^[\s-]*-[\s-]*$")
BARE_NUMBER = re.compile(rf"^\s*{NUMBER}\s*$")
PEAK_MEMORY = re.compile(rf"^Peak GPU memory usage (?P<value>{NUMBER}) MB\s*$")
PROFILE_NAME = re.compile(r"^Profiling result for a compiled module of benchmark (?P<value>.*):\s*$")
TRACE_WRITTEN = re.compile(r"^Chrome trace for the profile is written to (?P<value>\S+)\s*$")
WALL = re.compile(rf"^Total wall time (?P<value>{NUMBER}) ms\s*$")
SELF_TOTAL = re.compile(rf"^Self (?P<device>\w+) time total:\s*(?P<time>{NUMBER}\s*[a-z]+)\s*$")
BUSY = re.compile(rf"^Percent of time when (?P<device>\w+) is busy:\s*(?P<percent>{NUMBER})%\s*$")
NO_DEVICE = re.compile(r"^(?P<value>No device detected)\s*$")
TABULATE = re.compile(r"^Output for tabulate: (?P<fields>.*)$")
TIME_VALUE = re.compile(rf"^(?P<value>{NUMBER})\s*(?P<unit>s|ms|us|ns)$")
PERCENT_VALUE = re.compile(rf"^(?P<value>-?{NUMBER})%$")
DEVICE_TIME_COLUMN = re.compile(r"Self (?!CPU\b)(?P<device>\w+)")  # `Self CUDA`, not `Self CUDA %`


@dataclass(frozen=True)
class CategoryKernel:
    """One row of a `== <category> category kernels ==` table; times are per benchmark run."""

    name: str
    device_ms: float
    count: float
    percent: float  # of the wall time, as Inductor prints it
    line: int  # 1-based
    truncated: bool  # Inductor cut the name at CATEGORY_NAME_LIMIT characters


@dataclass(frozen=True)
class CategoryTable:
    category: str  # triton_pointwise | triton_reduction | triton_persistent_reduction | triton_unknown | unknown
    device: str  # from the `Self CUDA TIME (ms)` column: CUDA, XPU, ...
    line: int
    kernels: tuple[CategoryKernel, ...]
    total_ms: float | None
    total_percent: float | None

    @property
    def kernel_percent_sum(self) -> float:
        return sum(kernel.percent for kernel in self.kernels)


@dataclass(frozen=True)
class ProfilerRow:
    """One row of torch.profiler's key-averages table; times summed over all profiled runs."""

    name: str  # cut with `...` by the profiler when long
    cells: tuple[str, ...]  # raw text, aligned with ProfilerTable.columns
    self_cpu_us: float | None
    self_device_us: float | None
    calls: int | None
    input_shapes: str
    line: int


@dataclass(frozen=True)
class ProfilerTable:
    columns: tuple[str, ...]
    rows: tuple[ProfilerRow, ...]
    device: str | None  # the device of a `Self <DEV>` column, None on a CPU-only run
    self_cpu_total_us: float | None = None
    self_device_total_us: float | None = None


@dataclass(frozen=True)
class CategoryShare:
    category: str
    percent: float


@dataclass(frozen=True)
class TabulateSummary:
    """`Output for tabulate: name, <category %>..., busy %, wall ms`."""

    benchmark_name: str
    shares: tuple[CategoryShare, ...]
    busy_percent: float | None
    wall_ms: float | None


@dataclass(frozen=True)
class BenchmarkOutput:
    timings_s: tuple[float, ...] = ()  # print_performance's bare lines: seconds per call
    peak_memory_mb: float | None = None
    benchmark_name: str | None = None
    trace_path: str | None = None
    profiler: ProfilerTable | None = None
    categories: tuple[CategoryTable, ...] = ()
    busy_device: str | None = None
    busy_percent: float | None = None
    no_device: bool = False  # a CPU run: Inductor prints no category breakdown
    wall_ms: float | None = None
    tabulate: TabulateSummary | None = None

    def category(self, name: str) -> CategoryTable | None:
        return next((table for table in self.categories if table.category == name), None)

    @property
    def category_kernels(self) -> tuple[CategoryKernel, ...]:
        return tuple(kernel for table in self.categories for kernel in table.kernels)

    def cpu_kernel_rows(self) -> tuple[ProfilerRow, ...]:
        """Profiler rows of Inductor C++ kernels (`graph_0_cpp_fused_*`): the CPU run's kernel times."""
        rows = self.profiler.rows if self.profiler else ()
        return tuple(row for row in rows if CPU_KERNEL.search(row.name))


@dataclass(frozen=True)
class TraceKernel:
    name: str
    category: str  # the trace's `cat`: kernel | gpu_memcpy | gpu_memset | cpu_op
    ts_us: float
    dur_us: float
    device: int | None = None
    stream: int | None = None
    grid: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None


@dataclass(frozen=True)
class KernelTotal:
    name: str
    calls: int
    total_us: float


@dataclass(frozen=True)
class ChromeTrace:
    kernels: tuple[TraceKernel, ...] = ()
    original_events: int | None = None  # set when regenerate.py trimmed the trace (kernelLensTrim)
    problem: str | None = None  # why nothing could be read, for a message; None when it parsed

    def totals(self) -> tuple[KernelTotal, ...]:
        """Per kernel name: launches and summed duration, longest first."""
        sums: dict[str, tuple[int, float]] = {}
        for kernel in self.kernels:
            calls, total = sums.get(kernel.name, (0, 0.0))
            sums[kernel.name] = (calls + 1, total + kernel.dur_us)
        totals = [KernelTotal(name, calls, total) for name, (calls, total) in sums.items()]
        return tuple(sorted(totals, key=lambda t: (-t.total_us, t.name)))


def parse_time_us(text: str) -> float | None:
    match = TIME_VALUE.match(text.strip())
    return float(match["value"]) * TIME_UNITS_US[match["unit"]] if match else None


def parse_percent(text: str) -> float | None:
    match = PERCENT_VALUE.match(text.strip())
    return float(match["value"]) if match else None


def parse_float(text: str) -> float | None:
    return float(text) if re.fullmatch(NUMBER, text.strip()) else None


def rule_spans(line: str) -> list[tuple[int, int]] | None:
    """Column spans of a dashed rule line (`----  ----`), the shape both tables share."""
    if not RULE.match(line) or "-" not in line:
        return None
    return [(m.start(), m.end()) for m in re.finditer(r"-+", line)]


def cut_cells(line: str, spans: list[tuple[int, int]]) -> list[str]:
    """Slice a row by its rule's spans; the last cell runs to the end of the line."""
    ends = [end for _, end in spans[:-1]] + [len(line)]
    starts = [0] + [end for _, end in spans[:-1]]
    return [line[start:end].strip() for start, end in zip(starts, ends)]


def split_wide(line: str) -> list[str]:
    """Cells separated by 2+ spaces: the profiler's headers overflow its rule (`CUDA time avg`)."""
    return [cell for cell in re.split(r"\s{2,}", line.strip()) if cell]


@dataclass
class _Reader:
    """Mutable state of one pass over the lines; `parse_benchmark_output` freezes it."""

    fields: dict[str, object] = field(default_factory=dict)  # BenchmarkOutput's keyword arguments
    timings: list[float] = field(default_factory=list)
    categories: list[CategoryTable] = field(default_factory=list)
    mode: str = "top"  # top | category_columns | category_rule | category_rows | profiler_*
    spans: list[tuple[int, int]] = field(default_factory=list)
    table: tuple[str, str, int] = ("", "", 0)  # category, device, header line
    table_rows: list[CategoryKernel] = field(default_factory=list)
    table_total: tuple[float | None, float | None] = (None, None)
    profiler_columns: list[str] = field(default_factory=list)
    profiler_rows: list[ProfilerRow] = field(default_factory=list)
    self_totals: dict[str, float | None] = field(default_factory=dict)  # CPU / device -> us

    def close_table(self) -> None:
        if self.mode.startswith("category"):
            self.categories.append(CategoryTable(*self.table, tuple(self.table_rows), *self.table_total))
        self.mode = "top"

    def start_category(self, match: re.Match[str], number: int) -> None:
        self.close_table()
        self.mode, self.table = "category_columns", (match["category"], "", number)
        self.table_rows, self.table_total = [], (None, None)

    def category_line(self, line: str, number: int) -> None:
        columns = CATEGORY_COLUMNS.match(line)
        if self.mode == "category_columns" and columns:
            self.table, self.mode = (self.table[0], columns["device"], self.table[2]), "category_rule"
        elif self.mode == "category_rule" and rule_spans(line):
            self.spans, self.mode = rule_spans(line) or [], "category_rows"
        elif self.mode == "category_rows" and not line.strip():
            self.close_table()
        elif self.mode == "category_rows":
            self.category_row(cut_cells(line, self.spans), number)

    def category_row(self, cells: list[str], number: int) -> None:
        if len(cells) != 4:
            return
        name, ms, count, percent = cells[0], parse_float(cells[1]), parse_float(cells[2]), parse_percent(cells[3])
        if name == "Total" and not cells[2]:
            self.table_total = (ms, percent)
        elif name and ms is not None and count is not None and percent is not None:
            self.table_rows.append(CategoryKernel(name, ms, count, percent, number,
                                                  len(name) >= CATEGORY_NAME_LIMIT))

    def profiler_line(self, line: str, number: int) -> None:
        spans = rule_spans(line)
        if self.mode == "profiler_columns":
            columns = split_wide(line)
            self.profiler_columns, self.mode = (columns, "profiler_rule") if "Name" in columns else ([], "top")
        elif self.mode == "profiler_rule":
            self.mode = "profiler_rows" if spans else "top"
        elif spans:
            self.mode = "top"
        else:
            cells = split_wide(line)
            if len(cells) != len(self.profiler_columns):
                cells = cut_cells(line, self.spans)
            self.profiler_rows.append(self.profiler_row(cells, number))

    def profiler_row(self, cells: list[str], number: int) -> ProfilerRow:
        by_column = dict(zip(self.profiler_columns, cells))
        calls = by_column.get("# of Calls", "")
        return ProfilerRow(by_column.get("Name", cells[0] if cells else ""), tuple(cells),
                           parse_time_us(by_column.get("Self CPU", "")),
                           parse_time_us(by_column.get(device_time_column(self.profiler_columns) or "", "")),
                           int(calls) if re.fullmatch("[0-9]+", calls) else None,
                           by_column.get("Input Shapes", ""), number)

    def tabulate(self, match: re.Match[str]) -> None:
        fields = [part.strip() for part in match["fields"].split(",")]
        if len(fields) < 3:
            return
        wall = parse_time_us(fields[-1])
        percents = [parse_percent(part) for part in fields[1:-1]]
        names = TABULATE_CATEGORIES.get(len(percents) - 1) or tuple(f"column_{i}" for i in range(len(percents)))
        shares = tuple(CategoryShare(n, p) for n, p in zip(names, percents[:-1]) if p is not None)
        self.fields["tabulate"] = TabulateSummary(fields[0], shares, percents[-1],
                                                  wall / 1e3 if wall is not None else None)

    def self_total(self, match: re.Match[str]) -> None:
        self.self_totals[match["device"]] = parse_time_us(match["time"].replace(" ", ""))

    def busy(self, match: re.Match[str]) -> None:
        self.fields.update(busy_device=match["device"], busy_percent=float(match["percent"]))

    def profiler(self) -> ProfilerTable | None:
        if not self.profiler_columns:
            return None
        device_column = device_time_column(self.profiler_columns)
        device = device_column.split()[1] if device_column else None
        return ProfilerTable(tuple(self.profiler_columns), tuple(self.profiler_rows), device,
                             self.self_totals.get("CPU"), self.self_totals.get(device) if device else None)


def device_time_column(columns: list[str]) -> str | None:
    return next((column for column in columns if DEVICE_TIME_COLUMN.fullmatch(column)), None)


def _set(name: str, convert: Callable[[str], object]) -> Callable[[_Reader, re.Match[str]], None]:
    return lambda reader, match: reader.fields.__setitem__(name, convert(match["value"]))


# Lines recognised anywhere (each also ends an open table): pattern -> what it records.
SUMMARY_LINES: tuple[tuple[re.Pattern[str], Callable[[_Reader, re.Match[str]], None]], ...] = (
    (PEAK_MEMORY, _set("peak_memory_mb", float)),
    (PROFILE_NAME, _set("benchmark_name", str)),
    (TRACE_WRITTEN, _set("trace_path", str)),
    (WALL, _set("wall_ms", float)),
    (NO_DEVICE, _set("no_device", bool)),
    (SELF_TOTAL, _Reader.self_total),
    (BUSY, _Reader.busy),
    (TABULATE, _Reader.tabulate),
)


def _read_line(reader: _Reader, line: str, number: int) -> None:
    record = next(((rec, m) for pattern, rec in SUMMARY_LINES if (m := pattern.match(line))), None)
    header = CATEGORY_HEADER.match(line)
    if record or header:
        reader.close_table()
    if record:
        record[0](reader, record[1])
    elif header:
        reader.start_category(header, number)
    elif reader.mode.startswith("category"):
        reader.category_line(line, number)
    elif reader.mode.startswith("profiler"):
        reader.profiler_line(line, number)
    elif rule_spans(line) and not reader.profiler_columns:
        reader.mode, reader.spans = "profiler_columns", rule_spans(line) or []
    elif BARE_NUMBER.match(line):
        reader.timings.append(float(line))


def parse_benchmark_output(text: str) -> BenchmarkOutput:
    """Everything recognisable in `output_code.py -p`'s stdout; absent parts stay None / empty."""
    reader = _Reader()
    for number, line in enumerate(text.splitlines(), start=1):
        _read_line(reader, line, number)
    reader.close_table()
    return BenchmarkOutput(timings_s=tuple(reader.timings), profiler=reader.profiler(),
                           categories=tuple(reader.categories), **reader.fields)  # type: ignore[arg-type]


def read_benchmark_output(path: Path) -> BenchmarkOutput:
    """`parse_benchmark_output` of a file (e.g. BENCHMARK_OUTPUT_FILE); undecodable bytes are replaced."""
    return parse_benchmark_output(path.read_text(encoding="utf-8", errors="replace"))


def read_chrome_trace(path: Path) -> ChromeTrace:
    return parse_chrome_trace(path.read_text(encoding="utf-8", errors="replace"))


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dims(value: object) -> tuple[int, ...] | None:
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return tuple(value)
    return None


def _trace_kernel(event: object) -> TraceKernel | None:
    if not isinstance(event, dict) or event.get("ph") != "X":
        return None
    name, category = event.get("name"), event.get("cat")
    if not isinstance(name, str) or not isinstance(category, str):
        return None
    if category not in TRACE_DEVICE_CATEGORIES and not (category == "cpu_op" and CPU_KERNEL.search(name)):
        return None
    ts, dur = event.get("ts"), event.get("dur")
    if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)):
        return None
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    return TraceKernel(name, category, float(ts), float(dur), _int_or_none(args.get("device")),
                       _int_or_none(args.get("stream")), _dims(args.get("grid")), _dims(args.get("block")))


def parse_chrome_trace(text: str) -> ChromeTrace:
    """Kernel events of a Chrome trace written by `output_code.py -p` (GPU kernels or C++ kernel ops)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:
        return ChromeTrace(problem=f"not JSON: {error}")
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        return ChromeTrace(problem="no traceEvents list")
    kernels = tuple(k for k in map(_trace_kernel, data["traceEvents"]) if k is not None)
    trim = data.get("kernelLensTrim")
    original = _int_or_none(trim.get("original_events")) if isinstance(trim, dict) else None
    return ChromeTrace(kernels=tuple(sorted(kernels, key=lambda k: k.ts_us)), original_events=original)
