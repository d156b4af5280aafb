"""Parses `python output_code.py -k` (Inductor's per-kernel benchmark, TORCHINDUCTOR_BENCHMARK_KERNEL=1): one
line per kernel, named by the first 10 characters of its file's hash (`# kernel path: .../c7apxe2wdu....py`):
    None  UNK c7apxe2wdu 0.005ms  0.001 GB  282.49GB/s  56 regs  0 spills  512 shared mem
Pure text -> dataclasses; other lines are skipped."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

KERNEL_BENCH_FILE = "benchmark_kernels.txt"  # where the fixtures' regenerate.py keeps `-k`'s output
KERNEL_PATH = re.compile(r"^# kernel path: (?P<path>\S+\.py)\s*$")
LINE = re.compile(r"^\S+\s+\S+\s+(?P<key>c\w{9})\s+(?P<ms>[0-9.]+)ms\s+(?P<gb>[0-9.]+)\s*GB\s+(?P<gbps>[0-9.]+)GB/s"
                  r"(?:\s+(?P<regs>\d+) regs\s+(?P<spills>\d+) spills\s+(?P<shared>\d+) shared mem)?")
KEY_LENGTH = 10
PREVIOUS_KERNEL_END = "''', device_str="  # the line closing the kernel above


@dataclass(frozen=True)
class KernelBench:
    key: str  # the kernel file's name, first 10 characters
    ms: float
    gb: float
    gb_per_s: float
    registers: int | None
    spills: int | None
    shared: int | None
    line: int


def parse_kernel_bench(text: str) -> dict[str, KernelBench]:
    found = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = LINE.match(line)
        if match:
            ints = [int(match[k]) if match[k] is not None else None for k in ("regs", "spills", "shared")]
            found[match["key"]] = KernelBench(match["key"], float(match["ms"]), float(match["gb"]),
                                              float(match["gbps"]), *ints, number)
    return found


def kernel_path(output_code_lines: list[str], start_line: int) -> str | None:
    """The `# kernel path:` comment above a kernel's definition (1-based start_line: its `def`, deep inside a long
    kernel's string, or its `async_compile.triton(` line): the kernel's own file; None when the previous kernel's
    end comes first."""
    for number in range(min(start_line, len(output_code_lines)) - 1, -1, -1):
        text = output_code_lines[number]
        match = KERNEL_PATH.match(text)
        if match:
            return match["path"]
        if text.startswith(PREVIOUS_KERNEL_END):
            return None
    return None


def kernel_key(output_code_lines: list[str], start_line: int) -> str | None:
    """The kernel's bench key: its own file's first characters (what `-k` prints)."""
    path = kernel_path(output_code_lines, start_line)
    return Path(path).name[:KEY_LENGTH] if path is not None else None


# A kernel's standalone module (`python <kernel>.py`, TORCHINDUCTOR_BENCHMARK_KERNEL=1) prints one line:
#     0.051ms    0.013GB    254.34GB/s
STANDALONE = re.compile(r"^(?P<ms>[0-9.]+)ms\s+(?P<gb>[0-9.]+)GB\s+(?P<gbps>[0-9.]+)GB/s\s*$", re.MULTILINE)
KERNEL_BENCHMARKS_FILE = "kernel_benchmarks.json"  # beside output_code.py: what `kernelLens.benchmarkKernel` ran


@dataclass(frozen=True)
class VariantTiming:
    """One run of a kernel's standalone module: `default` as compiled, or `max_autotune`."""
    variant: str
    ms: float | None
    gb: float | None
    gb_per_s: float | None
    configs_tried: int | None = None  # configs its autotuning benchmarked (the Triton heuristics' log)
    best_config: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class KernelBenchmarks:
    """What `kernel_benchmarks.json` records for one kernel: its variants side by side, on which device."""
    kernel: str
    device: str | None
    variants: list[VariantTiming]


def parse_standalone(text: str) -> tuple[float, float, float] | None:
    """(ms, GB, GB/s) of a standalone kernel module's output: its last timing line."""
    found = list(STANDALONE.finditer(text))
    return (float(found[-1]["ms"]), float(found[-1]["gb"]), float(found[-1]["gbps"])) if found else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def parse_kernel_benchmarks(text: str) -> dict[str, KernelBenchmarks]:
    """`kernel_benchmarks.json`: {"kernels": {name: {"device": str, "variants": [{variant, ms, gb, gb_per_s,
    configs_tried, best_config, error}]}}}; entries of another shape are skipped."""
    try:
        kernels = json.loads(text).get("kernels", {})
    except (ValueError, AttributeError):
        return {}
    found = {}
    for name, record in kernels.items() if isinstance(kernels, dict) else ():
        if not isinstance(record, dict) or not isinstance(record.get("variants"), list):
            continue
        variants = [VariantTiming(str(v.get("variant")), _number(v.get("ms")), _number(v.get("gb")),
                                  _number(v.get("gb_per_s")),
                                  v["configs_tried"] if isinstance(v.get("configs_tried"), int) else None,
                                  v["best_config"] if isinstance(v.get("best_config"), str) else None,
                                  v["error"] if isinstance(v.get("error"), str) else None)
                    for v in record["variants"] if isinstance(v, dict)]
        device = record.get("device")
        found[name] = KernelBenchmarks(name, device if isinstance(device, str) else None, variants)
    return found
