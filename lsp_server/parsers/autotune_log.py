"""Parses what Inductor logs about autotuning, from a saved stderr / log file of the user's program:
  - Triton heuristics' debug log (TORCH_LOGS="+torch._inductor.runtime.triton_heuristics"):
    `Benchmark all input configs for K, get:` then one `<config>: <ms>, nreg N, nspill N, #shared-mem N` line
    per config, and `Best config for K: <config>: <ms>, nreg ...`;
  - the max-autotune table Inductor prints for GEMMs: `AUTOTUNE mm(2048x1024, 1024x768)`, `strides:`,
    `dtypes:`, then `  <choice> <ms> ms <pct>% <description>` per choice (best first);
  - coordinate descent (max-autotune, TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1), at a kernel's first launch:
    one `COORDESC: <config>: <ms>, nreg N, nspill N, #shared-mem N` line per config it benchmarked, then
    `Function hash H has best config <config>` (neither names the kernel: `CoordescSearch.best_timing` and the
    kernel's cache entries tell which search was whose);
  - `.best_config` records of Inductor's autotune cache (the chosen config and its Triton cache hash);
  - TORCH_TRACE's `triton_kernel_info` artifact: per kernel, the one config it was given (`only_config`).
Pure text -> dataclasses; unknown lines are skipped."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

LOG_PREFIX = r"^(?:[VIWDE]\d{4} [\d:.]+ \d+ \S+\] )?"
BENCHMARK_ALL = re.compile(LOG_PREFIX + r"Benchmark all input configs for (?P<kernel>\w+), get:\s*$")
CONFIG_TIMING = re.compile(LOG_PREFIX + r"(?P<config>(?:\w+: [^,]+, )*\w+: [^,:]+): (?P<ms>[0-9.eE+-]+), "
                           r"nreg (?P<nreg>\d+), "
                           r"nspill (?P<nspill>\d+), #shared-mem (?P<shared>\S+)\s*$")
BEST_CONFIG = re.compile(LOG_PREFIX + r"Best config for (?P<kernel>\w+): (?P<rest>.*)$")
COORDESC = re.compile(LOG_PREFIX + r"COORDESC: (?P<rest>.*)$")
COORDESC_BEST = re.compile(LOG_PREFIX + r"Function hash (?P<hash>\w+) has best config (?P<config>.*?)\s*$")
KERNEL_INFO = '"name": "triton_kernel_info"'
AUTOTUNE = re.compile(r"^AUTOTUNE (?P<op>\w+)\((?P<sizes>[^)]*)\)\s*$")
CHOICE = re.compile(r"^\s+(?P<name>\w+) (?P<ms>[0-9.]+) ms (?P<pct>[0-9.]+)%\s?(?P<description>.*)$")
CONFIG_ITEM = re.compile(r"(?P<key>\w+)[:=] ?'?(?P<value>[^,']+)'?")


@dataclass(frozen=True)
class TriedConfig:
    config: str  # as Inductor prints it: `XBLOCK: 8, num_warps: 2, num_ctas: 1, num_stages: 1, maxnreg: None`
    ms: float
    registers: int | None = None
    spills: int | None = None
    shared: str | None = None

    def settings(self) -> dict[str, str]:
        return {m["key"]: m["value"].strip() for m in CONFIG_ITEM.finditer(self.config)}


@dataclass
class KernelAutotune:
    """A pointwise/reduction kernel's configs benchmarked at its first launch, and the one kept."""
    kernel: str
    tried: list[TriedConfig] = field(default_factory=list)
    best: TriedConfig | None = None


@dataclass(frozen=True)
class GemmChoice:
    name: str  # `mm` (the ATen / cuBLAS call) or `triton_mm_11` (a Triton template config)
    ms: float
    percent: float  # best time / this time, as Inductor prints it
    description: str


@dataclass
class GemmAutotune:
    op: str  # mm | addmm | bmm | ...
    sizes: str
    choices: list[GemmChoice] = field(default_factory=list)  # best first
    line: int = 0

    @property
    def chosen(self) -> GemmChoice | None:
        return self.choices[0] if self.choices else None


@dataclass
class CoordescSearch:
    """One coordinate-descent search: the configs it benchmarked (in order) and the one it kept."""
    tried: list[TriedConfig] = field(default_factory=list)
    best: str | None = None  # the config as logged
    function_hash: str | None = None

    @property
    def best_timing(self) -> TriedConfig | None:
        """The kept config's own benchmark line (its registers and shared memory name its cache entry)."""
        return next((t for t in self.tried if t.config == self.best), None)


@dataclass
class AutotuneLog:
    kernels: dict[str, KernelAutotune] = field(default_factory=dict)
    gemms: list[GemmAutotune] = field(default_factory=list)
    coordesc: list[CoordescSearch] = field(default_factory=list)


def _timing(match: re.Match[str]) -> TriedConfig:
    return TriedConfig(match["config"], float(match["ms"]), int(match["nreg"]), int(match["nspill"]), match["shared"])


def parse_autotune_log(text: str) -> AutotuneLog:
    log = AutotuneLog()
    open_kernel: KernelAutotune | None = None
    open_gemm: GemmAutotune | None = None
    search: CoordescSearch | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if (match := COORDESC.match(line)) is not None:
            timing = CONFIG_TIMING.match(match["rest"])
            if timing is not None:
                search = search or CoordescSearch()
                search.tried.append(_timing(timing))
        elif (match := COORDESC_BEST.match(line)) is not None and search is not None:
            search.best, search.function_hash = match["config"], match["hash"]
            log.coordesc.append(search)
            search = None
        elif (match := BENCHMARK_ALL.match(line)) is not None:
            open_kernel = log.kernels.setdefault(match["kernel"], KernelAutotune(match["kernel"]))
            open_kernel.tried = []
            open_gemm = None
        elif (match := BEST_CONFIG.match(line)) is not None:
            timing = CONFIG_TIMING.match(match["rest"])
            entry = log.kernels.setdefault(match["kernel"], KernelAutotune(match["kernel"]))
            entry.best = _timing(timing) if timing else entry.best
            open_kernel = None
        elif open_kernel is not None and (match := CONFIG_TIMING.match(line)) is not None:
            open_kernel.tried.append(_timing(match))
        elif (match := AUTOTUNE.match(line)) is not None:
            open_gemm = GemmAutotune(match["op"], match["sizes"], line=number)
            log.gemms.append(open_gemm)
            open_kernel = None
        elif open_gemm is not None and (match := CHOICE.match(line)) is not None:
            open_gemm.choices.append(GemmChoice(match["name"], float(match["ms"]), float(match["pct"]),
                                                match["description"].strip()))
        elif open_gemm is not None and not line.startswith(("strides:", "dtypes:")):
            open_gemm = None
    return log


def parse_kernel_info(text: str) -> dict[str, dict]:
    """Kernel name -> its `triton_kernel_info` record (the payload line after each such artifact of a TORCH_TRACE
    log); `only_config` ([[name, value], ...]) becomes a dict. A name recorded twice differently is dropped: the
    records do not say which graph compiled it."""
    found: dict[str, dict] = {}
    clashing: set[str] = set()
    lines = text.splitlines()
    for number, line in enumerate(lines[:-1]):
        if KERNEL_INFO not in line or not lines[number + 1].startswith("\t"):
            continue
        try:
            payload = json.loads(lines[number + 1][1:])
        except ValueError:
            continue
        for name, record in payload.items() if isinstance(payload, dict) else ():
            if not isinstance(record, dict):
                continue
            only = record.get("only_config")
            if isinstance(only, list):
                record = {**record, "only_config": {str(p[0]): p[1] for p in only if isinstance(p, list) and len(p) == 2}}
            if name in found and found[name].get("only_config") != record.get("only_config"):
                clashing.add(name)
            found[name] = record
    return {name: record for name, record in found.items() if name not in clashing}


def parse_best_config(text: str) -> dict | None:
    """A `.best_config` record: {XBLOCK: .., num_warps: .., num_stages: .., triton_cache_hash: .., ...}."""
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
