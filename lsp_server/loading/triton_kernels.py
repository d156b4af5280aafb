"""What a real GPU run's Triton kernels compiled to and how they were autotuned, attached to each Kernel
(`kernel.gpu`): the Triton cache entries kept beside the debug dir (`<run>/triton_cache/<hash>/`), the one
Inductor launched (the only entry, else the `.best_config` record's triton_cache_hash, else the entry whose
warps and registers match the logged best config), and the autotuning Inductor logged (a saved stderr /
`*.log` in the program's folder) or recorded (`.best_config` under `<program>/inductor_cache/`).

Also the link between a Triton kernel's own file (the `.py` the IR's loc records name) and output_code.py,
where Inductor embeds the same text: line L of the file is line `opening + L - 1` of output_code.py, where
`opening` is the line of `<name> = async_compile.triton('<name>', '''`."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from lsp_server.loading.gpu_profile import Launch, launch_facts
from lsp_server.model import Graph, Kernel
from lsp_server.parsers.autotune_log import (
    AutotuneLog,
    CoordescSearch,
    GemmAutotune,
    KernelAutotune,
    TriedConfig,
    parse_autotune_log,
    parse_best_config,
    parse_kernel_info,
)
from lsp_server.parsers.kernel_bench import (
    KERNEL_BENCH_FILE,
    KERNEL_BENCHMARKS_FILE,
    KernelBench,
    KernelBenchmarks,
    kernel_key,
    kernel_path,
    parse_kernel_bench,
    parse_kernel_benchmarks,
)
from lsp_server.parsers.triton_cache import (
    StageLine,
    TritonEntry,
    read_cache,
    stage_lines,
)

TRITON_CACHE_FOLDER = "triton_cache"
CONSTEXPR_BLOCK = re.compile(r"^\s+(?P<name>[A-Z0-9_]*BLOCK): tl\.constexpr = (?P<value>\d+)\s*$")
CONSTEXPR_PARAMETER = re.compile(r"(?P<name>[A-Z0-9_]*BLOCK) ?: ?tl\.constexpr")
TRACE_LOG_GLOB = "torch_trace/*.log"  # TORCH_TRACE beside the program: its triton_kernel_info records
NUMEL = re.compile(r"^\s+(?P<dim>[xyz])numel = (?P<value>\d+)\s*$")
GRID_AXES = {"x": 0, "y": 1, "z": 2}  # Inductor's Grid1D/2D/3D: grid axis i = cdiv(<dim>numel, <DIM>BLOCK)
LOG_GLOBS = ("*.log", "*stderr*.txt", "*.err")
MAX_LOG_BYTES = 20_000_000
AUTOTUNE_MARKS = ("Benchmark all input configs for", "AUTOTUNE ", "Best config for")
_caches: dict[Path, tuple[float, dict[str, list[TritonEntry]]]] = {}
_logs: dict[Path, tuple[tuple, "ProgramRecords"]] = {}
_stages: dict[Path, tuple[float, list[StageLine]]] = {}


def clear_caches() -> None:
    """Forget every parsed cache folder, log and stage file (benchmarks measure a cold index)."""
    _caches.clear()
    _logs.clear()
    _stages.clear()


def located_lines(path: Path, stage: str) -> list[StageLine]:
    """A stage file's located lines, parsed on first use (a chain link asks for one or two files)."""
    mtime = path.stat().st_mtime
    cached = _stages.get(path)
    if cached is None or cached[0] != mtime:
        cached = _stages[path] = (mtime, stage_lines(path.read_text(encoding="utf-8", errors="replace"), stage))
    return cached[1]


TRITON_LIBRARY_MARKS = ("/triton/language/", "/triton/runtime/", "/site-packages/triton/")


def kernel_file(lines: list[StageLine]) -> str | None:
    """The Triton kernel's own file: of the files a stage's lines come from, the one that is not Triton's library
    (whose inlined functions, `sigmoid`, a reduction's combine, can hold most of a small kernel's instructions)."""
    counts: dict[str, int] = {}
    for line in lines:
        if line.source_file:
            counts[line.source_file] = counts.get(line.source_file, 0) + 1
    own = {f: n for f, n in counts.items() if not any(mark in f for mark in TRITON_LIBRARY_MARKS)}
    pool = own or counts
    return max(pool, key=pool.__getitem__) if pool else None


def own_line(line: StageLine, own: str | None) -> bool:
    return line.source_file is None or own is None or line.source_file == own


@dataclass
class ProgramRecords:
    log: AutotuneLog = field(default_factory=AutotuneLog)
    best_configs: dict[str, dict] = field(default_factory=dict)  # triton_cache_hash -> record
    kernel_info: dict[str, dict] = field(default_factory=dict)  # kernel -> TORCH_TRACE's triton_kernel_info record


@dataclass
class KernelGpu:
    entries: list[TritonEntry]  # every compiled config of the kernel
    chosen: TritonEntry | None
    chosen_by: str  # only entry | .best_config | logged best config | unknown
    autotune: KernelAutotune | None = None
    best_config: dict | None = None  # the .best_config record of the chosen entry
    gemm: list[GemmAutotune] = field(default_factory=list)  # max-autotune tables of this extern/template op
    bench: KernelBench | None = None  # its line of `output_code.py -k` kept beside output_code.py
    offset: int | None = None  # kernel_file_offset: kernel-file line L is output_code.py line offset + L
    bench_key: str | None = None  # its `# kernel path:` file's first 10 characters, what `-k` prints
    kernel_file: str | None = None  # its `# kernel path:`: the kernel's own .py (what the IR's loc records name)
    source_blocks: dict[str, int] = field(default_factory=dict)  # `R0_BLOCK: tl.constexpr = 64` in its source
    grid_blocks: dict[str, int] = field(default_factory=dict)  # XBLOCK = xnumel / grid x of the profiled launch
    coordesc: CoordescSearch | None = None  # the coordinate-descent search that kept the launched config
    only_config: dict[str, object] = field(default_factory=dict)  # triton_kernel_info: the one config it was given
    benchmarks: KernelBenchmarks | None = None  # kernel_benchmarks.json: its standalone module's variants timed

    def entry_keyed(self, key: str) -> TritonEntry | None:
        return next((e for e in self.entries if e.key == key), None)

    @staticmethod
    def locate(entry: TritonEntry, stage: str, line: int) -> tuple[StageLine | None, bool]:
        """(the location record of a stage file's 1-based line, whether it is the kernel's own file's)."""
        path = entry.stage_path(stage)
        lines = located_lines(path, stage) if path is not None else []
        at = next((s for s in lines if s.line == line), None)
        return at, at is not None and own_line(at, kernel_file(lines))

    @staticmethod
    def stage_links(entry: TritonEntry, triton_line: int) -> dict[str, tuple[str, list[int]]]:
        """stage -> (its file, its 0-based lines that came from Triton line `triton_line` of the kernel's file)."""
        links = {}
        for stage in entry.stages:
            path = entry.stage_path(stage)
            lines = located_lines(path, stage)
            own = kernel_file(lines)
            links[stage] = (str(path), [s.line - 1 for s in lines if s.source_line == triton_line and own_line(s, own)])
        return links

    def block_sizes(self) -> dict[str, str]:
        """XBLOCK / R0_BLOCK / ... of the launched config (see block_origins)."""
        return {name: value for name, (value, _) in self.block_origins().items()}

    def block_origins(self) -> dict[str, tuple[str, str]]:
        """Block size -> (value, where it is from): the .best_config record, else the logged best config, else the
        one config Inductor gave the kernel (TORCH_TRACE's triton_kernel_info: a looped reduction's R0_BLOCK); a
        `R0_BLOCK: tl.constexpr = 64` of the kernel's source; else the launch grid (`xnumel` over the grid's x)."""
        found: dict[str, tuple[str, str]] = {}
        if self.best_config:
            found = {k: (str(v), ".best_config") for k, v in self.best_config.items() if k.endswith("BLOCK")}
        elif self.autotune and self.autotune.best:
            found = {k: (v, "autotune log") for k, v in self.autotune.best.settings().items() if k.endswith("BLOCK")}
        elif self.only_config:
            found = {k: (str(v), "only config") for k, v in self.only_config.items() if k.endswith("BLOCK")}
        for origin, sizes in (("kernel source", self.source_blocks), ("launch grid", self.grid_blocks)):
            for name, value in sizes.items():
                found.setdefault(name, (str(value), origin))
        return dict(sorted(found.items()))


def run_dir_of(graph: Graph) -> Path:
    return graph.path.parents[1] if len(graph.path.parents) > 1 else graph.path


def program_dir_of(graph: Graph) -> Path | None:
    """The folder holding torch_compile_debug/ (the user's program's), None for another layout."""
    parents = graph.path.parents
    if len(parents) > 3 and parents[0].name == "torchinductor" and parents[2].name == "torch_compile_debug":
        return parents[3]
    return None


def cache_entries(run_dir: Path) -> dict[str, list[TritonEntry]]:
    folder = run_dir / TRITON_CACHE_FOLDER
    if not folder.is_dir():
        return {}
    mtime = folder.stat().st_mtime
    cached = _caches.get(folder)
    if cached is None or cached[0] != mtime:
        cached = _caches[folder] = (mtime, read_cache(folder))
    return cached[1]


def program_records(program: Path) -> ProgramRecords:
    """The autotune log lines of the program's saved logs and its .best_config records (read once per version)."""
    logs = [p for pattern in LOG_GLOBS for p in program.glob(pattern)
            if p.is_file() and p.stat().st_size < MAX_LOG_BYTES]
    configs = sorted(program.glob("inductor_cache/*/*.best_config"))
    traces = sorted(program.glob(TRACE_LOG_GLOB))
    key = tuple((p, p.stat().st_mtime) for p in sorted(set(logs)) + configs + traces)
    cached = _logs.get(program)
    if cached is not None and cached[0] == key:
        return cached[1]
    records = ProgramRecords()
    for path in sorted(set(logs)):
        text = path.read_text(encoding="utf-8", errors="replace")
        if any(mark in text for mark in AUTOTUNE_MARKS):
            found = parse_autotune_log(text)
            records.log.kernels.update(found.kernels)
            records.log.gemms += found.gemms
            records.log.coordesc += found.coordesc
    for path in sorted(program.glob(TRACE_LOG_GLOB)):
        if path.stat().st_size < MAX_LOG_BYTES:
            records.kernel_info.update(parse_kernel_info(path.read_text(encoding="utf-8", errors="replace")))
    for path in configs:
        record = parse_best_config(path.read_text(encoding="utf-8", errors="replace"))
        if record and isinstance(record.get("triton_cache_hash"), str):
            records.best_configs[record["triton_cache_hash"]] = record
    _logs[program] = (key, records)
    return records


def coordesc_record(kernel_file: str | None, constexprs: set[str]) -> dict | None:
    """The .best_config coordinate descent wrote for a kernel: beside the kernel's own file, found by coordinate
    descent, with no triton_cache_hash (Inductor does not record the entry it kept), its block sizes the kernel's
    constexpr parameters; None where there is none, or several (another kernel of the folder could own it)."""
    folder = Path(kernel_file).parent if kernel_file else None
    found = []
    for path in sorted(folder.glob("*.best_config")) if folder is not None and folder.is_dir() else ():
        record = parse_best_config(path.read_text(encoding="utf-8", errors="replace"))
        if record and record.get("found_by_coordesc") and not record.get("triton_cache_hash") \
                and {k for k in record if k.endswith("BLOCK")} == constexprs:
            found.append(record)
    return found[0] if len(found) == 1 else None


def _compiled_as(entry: TritonEntry, timing: TriedConfig) -> bool:
    """Whether a benchmarked config's logged warps, registers and shared memory are this entry's."""
    return str(entry.num_warps) == timing.settings().get("num_warps") and entry.usage is not None \
        and entry.usage.registers == timing.registers and str(entry.shared) == timing.shared


def coordesc_search(entries: list[TritonEntry], record: dict, searches: list[CoordescSearch]) -> CoordescSearch | None:
    """The logged search that kept the record's config and whose every benchmarked config compiled to one of the
    kernel's entries (the log never names the kernel)."""
    wanted = {k: str(v) for k, v in record.items() if k.endswith("BLOCK") or k in ("num_warps", "num_stages")}
    found = [s for s in searches if s.best_timing is not None
             and all(s.best_timing.settings().get(k) == v for k, v in wanted.items())
             and all(any(_compiled_as(e, t) for e in entries) for t in s.tried)]
    return found[-1] if found else None


def coordesc_entry(entries: list[TritonEntry], record: dict, search: CoordescSearch | None,
                   launched: Launch | None) -> TritonEntry | None:
    """The entry of the config coordinate descent kept: the record's warps and stages, and the registers and
    shared memory its search logged for it (else the registers the profiler saw it launched with)."""
    same = [e for e in entries if str(e.num_warps) == str(record.get("num_warps"))
            and str(e.num_stages) == str(record.get("num_stages"))]
    best = search.best_timing if search is not None else None
    if best is not None:
        same = [e for e in same if _compiled_as(e, best)]
    elif launched is not None and launched.registers is not None:
        same = [e for e in same if e.usage and e.usage.registers == launched.registers]
    return same[0] if len(same) == 1 else None


def choose(entries: list[TritonEntry], autotune: KernelAutotune | None, best_configs: dict[str, dict],
           launched: Launch | None = None,
           coordesc: tuple[dict, CoordescSearch | None] | None = None) -> tuple[TritonEntry | None, str]:
    """The entry Inductor launched: the only one; the .best_config record's; the config coordinate descent kept
    (`coordesc`: its record and logged search); the logged best config's warps and registers; the registers and
    threads the profiler saw it launched with (`launched`). Never the `-k` line's registers: that benchmark
    autotunes again (the H100 run's gelu kernel: 18 registers launched, 32 in -k)."""
    if len(entries) == 1:
        return entries[0], "only entry"
    recorded = [e for e in entries if e.key in best_configs]
    if len(recorded) == 1:
        return recorded[0], ".best_config"
    kept = coordesc_entry(entries, *coordesc, launched) if coordesc is not None else None
    if kept is not None:
        return kept, "coordinate descent"
    best = autotune.best if autotune else None
    if best is not None:
        warps = best.settings().get("num_warps")
        matching = [e for e in entries if str(e.num_warps) == warps and e.usage and e.usage.registers == best.registers]
        if len(matching) == 1:
            return matching[0], "logged best config"
    if launched is not None and launched.registers is not None:
        registers, threads = launched.registers, launched.threads
        matching = [e for e in entries if e.usage and e.usage.registers == registers
                    and (threads is None or e.num_warps is None or e.num_warps * 32 == threads)]
        if len(matching) == 1:
            return matching[0], "profiled launch"
    return None, "unknown"


def gemm_tables(kernel: Kernel, log: AutotuneLog) -> list[GemmAutotune]:
    """Max-autotune tables for an extern GEMM call (`extern_kernels.mm`) or a Triton template kernel."""
    op = kernel.name.removeprefix("extern_kernels.") if kernel.kind == "extern" else None
    if op is None and kernel.kind == "template":
        op = next((g.op for g in log.gemms if f"_{g.op}" in kernel.name), None)
    return [g for g in log.gemms if g.op == op]


def attach_triton(graph: Graph) -> None:
    """Set `kernel.gpu` for the graph's Triton kernels with cache entries, and extern GEMMs that were autotuned."""
    if not any(k.language == "triton" for k in graph.kernels):
        return
    program = program_dir_of(graph)
    if program is None:
        return
    entries = cache_entries(run_dir_of(graph))
    try:
        records = program_records(program)
    except OSError:
        records = ProgramRecords()
    launches = launch_facts(graph)
    bench_file = graph.path / KERNEL_BENCH_FILE
    benches = parse_kernel_bench(bench_file.read_text(encoding="utf-8", errors="replace")) \
        if bench_file.is_file() else {}
    timed = graph.path / KERNEL_BENCHMARKS_FILE
    standalone = parse_kernel_benchmarks(timed.read_text(encoding="utf-8", errors="replace")) \
        if timed.is_file() else {}
    for kernel in graph.kernels:
        tables = gemm_tables(kernel, records.log) if kernel.kind in ("extern", "template") else []
        mine = entries.get(kernel.name, [])
        bench = benches.get(kernel_key(graph.output_code_lines, kernel.start_line) or "") \
            if kernel.language == "triton" else None
        if not mine and not tables and bench is None and kernel.language != "triton":
            continue
        autotune = records.log.kernels.get(kernel.name)
        own_file = kernel_path(graph.output_code_lines, kernel.start_line)
        body = graph.output_code_lines[kernel.start_line - 1:kernel.end_line]
        record = coordesc_record(own_file, constexpr_parameters(body, kernel.name)) \
            if kernel.language == "triton" and not any(e.key in records.best_configs for e in mine) else None
        search = coordesc_search(mine, record, records.log.coordesc) if record is not None else None
        chosen, how = choose(mine, autotune, records.best_configs, launches.get(kernel.name),
                             (record, search) if record is not None else None)
        kernel.gpu = KernelGpu(mine, chosen, how, autotune,
                               (records.best_configs.get(chosen.key) if chosen else None) or record, tables, bench,
                               kernel_file_offset(graph, kernel) if kernel.language == "triton" else None,
                               kernel_key(graph.output_code_lines, kernel.start_line), own_file)
        if kernel.language == "triton":
            kernel.gpu.source_blocks = constexpr_blocks(body)
            kernel.gpu.grid_blocks = grid_blocks(body, launches.get(kernel.name))
            kernel.gpu.coordesc = search
            only = records.kernel_info.get(kernel.name, {}).get("only_config")
            kernel.gpu.only_config = only if isinstance(only, dict) else {}
            kernel.gpu.benchmarks = standalone.get(kernel.name)


def kernel_file_offset(graph: Graph, kernel: Kernel) -> int | None:
    """0-based output_code.py line of `<name> = async_compile.triton('<name>', '''`: kernel-file line L is
    output_code line (offset + L), 1-based."""
    opening = f"{kernel.name} = async_compile.triton("
    for number in range(max(kernel.start_line - 40, 0), min(kernel.start_line + 5, len(graph.output_code_lines))):
        if graph.output_code_lines[number].startswith(opening):
            return number
    return next((n for n, text in enumerate(graph.output_code_lines) if text.startswith(opening)), None)


def constexpr_parameters(body: list[str], name: str) -> set[str]:
    """The block sizes a kernel takes as constexpr parameters (`XBLOCK : tl.constexpr, R0_BLOCK : tl.constexpr`)."""
    header = next((text for text in body if text.startswith(f"def {name}(")), "")
    return {m["name"] for m in CONSTEXPR_PARAMETER.finditer(header)}


def constexpr_blocks(body: list[str]) -> dict[str, int]:
    """Block sizes the kernel's source fixes: a persistent reduction's `R0_BLOCK: tl.constexpr = 64`."""
    return {m["name"]: int(m["value"]) for text in body if (m := CONSTEXPR_BLOCK.match(text))}


def grid_blocks(body: list[str], launch: Launch | None) -> dict[str, int]:
    """XBLOCK (YBLOCK, ZBLOCK) of a launch whose grid axis divides the kernel's static `xnumel` into a power of
    two: with grid g >= 2 blocks, cdiv(numel, B) == g holds for that power of two B alone."""
    if launch is None or launch.grid is None:
        return {}
    found = {}
    for text in body:
        match = NUMEL.match(text)
        if match is None:
            continue
        numel, blocks = int(match["value"]), launch.grid[GRID_AXES[match["dim"]]]
        size = numel // blocks if blocks >= 2 and numel % blocks == 0 else 0
        if size and size & (size - 1) == 0:
            found[f"{match['dim'].upper()}BLOCK"] = size
    return found
