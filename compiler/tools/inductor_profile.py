"""`kernel-lens profile-inductor PATH`: profile real Inductor graphs the way Inductor itself does, with
`python output_code.py -p`, and keep what it prints as `benchmark_output.txt` beside each `output_code.py`
(its Chrome trace, cut to kernel events, as `benchmark_trace.json`): the files the language server reads for
a graph's per-category breakdown ("triton_poi_ 62%") and the share of time the GPU was busy.

PATH is an `output_code.py`, a graph folder, or any folder above them (a run, a `torch_compile_debug/`).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

BENCHMARK_OUTPUT_FILE = "benchmark_output.txt"  # names fixed by docs/debug-directory.md
BENCHMARK_TRACE_FILE = "benchmark_trace.json"
TRACE_WRITTEN = re.compile(r"Chrome trace for the profile is written to (\S+)")
# Where wrapper_benchmark.PROFILE_PATH has pointed in every torch seen so far (when -p does not say).
DEFAULT_TRACE = Path(tempfile.gettempdir()) / "compiled_module_profile.json"
KEPT_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
CPU_KERNEL_MARK = "cpp_fused"  # Inductor C++ kernels' record functions (cpp.enable_kernel_profile)
MAX_TRACE_EVENTS = 5000
EXIT_OK, EXIT_USER_FAILURE, EXIT_USAGE = 0, 1, 2


@dataclass
class GraphProfileRun:
    """One `output_code.py -p`: its exit code and the files written beside it."""

    output_code: Path
    exit_code: int
    written: list[Path]
    error_tail: str = ""


def output_codes(path: Path) -> list[Path]:
    """The Inductor `output_code.py` files PATH names (itself, in its folder, or below it)."""
    if path.is_file():
        return [path] if path.name == "output_code.py" else []
    if (path / "output_code.py").is_file():
        return [path / "output_code.py"]
    return sorted(p for p in path.rglob("output_code.py") if "torchinductor" in p.parts)


def write_atomically(target: Path, text: str) -> None:
    """Temp file + rename: the language server's watcher never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, target)


def trimmed_trace(raw: dict) -> dict:
    """Kernel events (device activity, Inductor's C++ kernels) and metadata: a -p trace also holds every CPU
    op and runs to megabytes."""
    events = raw.get("traceEvents", []) if isinstance(raw, dict) else []
    events = [e for e in events if isinstance(e, dict)]
    kept = [e for e in events if e.get("ph") == "M" or e.get("cat") in KEPT_CATEGORIES
            or (e.get("cat") == "cpu_op" and CPU_KERNEL_MARK in str(e.get("name", "")))]
    return {**{k: v for k, v in raw.items() if k != "traceEvents"}, "traceEvents": kept[:MAX_TRACE_EVENTS]}


def profile_output_code(output_code: Path, timeout_s: float) -> GraphProfileRun:
    """Run `python output_code.py -p` in its folder; keep its stdout and trace beside it."""
    folder = output_code.parent
    try:
        done = subprocess.run([sys.executable, output_code.name, "-p"], cwd=folder, capture_output=True,
                              text=True, timeout=timeout_s, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    except subprocess.TimeoutExpired:
        return GraphProfileRun(output_code, EXIT_USER_FAILURE, [], f"timed out after {timeout_s:g} s")
    written = []
    if done.stdout.strip():
        write_atomically(folder / BENCHMARK_OUTPUT_FILE, done.stdout)
        written.append(folder / BENCHMARK_OUTPUT_FILE)
    if done.returncode != 0:
        return GraphProfileRun(output_code, EXIT_USER_FAILURE, written, done.stderr[-2000:])
    found = TRACE_WRITTEN.search(done.stdout)
    trace = Path(found.group(1)) if found else DEFAULT_TRACE
    try:
        raw = json.loads(trace.read_text(encoding="utf-8", errors="replace"))
        trace.unlink()  # every -p writes the same path: never let a stale one be taken for the next graph's
    except (OSError, ValueError):
        return GraphProfileRun(output_code, EXIT_OK, written)
    write_atomically(folder / BENCHMARK_TRACE_FILE, json.dumps(trimmed_trace(raw)))
    written.append(folder / BENCHMARK_TRACE_FILE)
    return GraphProfileRun(output_code, EXIT_OK, written)


def cmd_profile_inductor(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.exists():
        print(f"kernel-lens profile-inductor: {path}: no such file or folder", file=sys.stderr)
        return EXIT_USAGE
    targets = output_codes(path)
    if not targets:
        print(f"kernel-lens profile-inductor: no real Inductor output_code.py at or below {path}", file=sys.stderr)
        return EXIT_USAGE
    status = EXIT_OK
    for output_code in targets:
        print(f"profiling {output_code} (python output_code.py -p)", flush=True)
        result = profile_output_code(output_code.resolve(), args.timeout)
        for written in result.written:
            print(f"  wrote {written}", flush=True)
        if result.exit_code != EXIT_OK:
            print(f"  failed: {result.error_tail.strip()}", flush=True)
            status = EXIT_USER_FAILURE
    return status


def add_subcommand(sub: argparse._SubParsersAction) -> None:
    """Registers `profile-inductor` on the CLI's sub-command parser."""
    p = sub.add_parser("profile-inductor", help="run real Inductor's `python output_code.py -p` for each graph at "
                                                "or below PATH and keep its output as benchmark_output.txt (and "
                                                "benchmark_trace.json) for the language server")
    p.add_argument("path", metavar="PATH", help="an output_code.py, its graph folder, or a folder above them")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per graph (default 600)")
    p.set_defaults(func=cmd_profile_inductor)
