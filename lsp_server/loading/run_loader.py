"""Finds run folders under debug roots and loads one run (all its graph folders) into a `Run`."""
from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from lens_format.errors import ParseError
from lens_format.run_record import FILE as RUN_RECORD_FILE
from lens_format.run_record import read_run_record
from lsp_server.loading.discovery import DEBUG_DIR_NAME, discover
from lsp_server.loading.graph_builder import build_graph, load_run_level_compile_error
from lsp_server.loading.inductor_build_errors import attach_trace_build_errors
from lsp_server.loading.kernel_stacks import attach_logged_stacks
from lsp_server.model import Graph, Run

RUN_NAME = re.compile(r"^run_(\d{4})_(\d\d)_(\d\d)_(\d\d)_(\d\d)_(\d\d)_(\d+)(?:-pid_\d+)?")
RUN_PID = re.compile(r"-pid_(\d+)$")
# Sub-folder of a run → the run's kind (ours, or real Inductor's).
RUN_KINDS: dict[str, str] = {"lens": "lens", "torchinductor": "inductor"}
GRAPH_MARKERS = ("output_code.py", "kernel_map.json", "fx_graph_readable.py", "compile_error.json")


def debug_dir_for_root(root: Path) -> Path:
    """A root is a `torch_compile_debug` folder itself, a folder holding `run_*` folders, or a workspace."""
    if root.name == DEBUG_DIR_NAME or is_run_dir(root) or any_run_children(root):
        return root
    return root / DEBUG_DIR_NAME


def debug_dirs_under(folder: Path) -> list[Path]:
    """The debug roots `index DIR` reads: DIR itself when it is one (or a run), else every `torch_compile_debug`
    folder at any depth below it."""
    direct = debug_dir_for_root(folder)
    if direct != folder / DEBUG_DIR_NAME:
        return [direct]
    return discover(folder).debug_dirs


def any_run_children(folder: Path) -> bool:
    try:
        return any(child.name.startswith("run_") and child.is_dir() for child in folder.iterdir())
    except OSError:
        return False


def is_run_dir(folder: Path) -> bool:
    return any((folder / sub).is_dir() for sub in RUN_KINDS)


def find_run_dirs(debug_dir: Path) -> list[Path]:
    if is_run_dir(debug_dir):
        return [debug_dir]
    try:
        return sorted(child for child in debug_dir.iterdir() if child.is_dir() and is_run_dir(child))
    except OSError:
        return []


def run_time(run_dir: Path) -> datetime:
    match = RUN_NAME.match(run_dir.name)
    if match:
        year, month, day, hour, minute, second, micro = (int(g) for g in match.groups())
        try:
            return datetime(year, month, day, hour, minute, second, min(micro, 999_999))
        except ValueError:
            pass
    try:
        return datetime.fromtimestamp(run_dir.stat().st_mtime)
    except OSError:
        return datetime.fromtimestamp(0)


def graph_dirs(run_dir: Path) -> list[tuple[str, Path]]:
    found = []
    for sub, kind in RUN_KINDS.items():
        try:
            children = sorted((run_dir / sub).iterdir())
        except OSError:
            continue
        found.extend((kind, c) for c in children if c.is_dir() and any((c / m).is_file() for m in GRAPH_MARKERS))
    return found


def load_run(run_dir: Path, run_id: str | None = None) -> Run | None:
    """None when the folder is gone or is not a run; never raises on file contents."""
    if not run_dir.is_dir() or not is_run_dir(run_dir):
        return None
    folders = graph_dirs(run_dir)
    kinds = {kind for kind, _ in folders} or {RUN_KINDS[s] for s in RUN_KINDS if (run_dir / s).is_dir()}
    run = Run(run_id or run_dir.name, run_dir, "lens" if "lens" in kinds else "inductor", run_time(run_dir))
    pid = RUN_PID.search(run_dir.name)
    run.pid = int(pid.group(1)) if pid else None
    read_rank(run, run_dir / "lens" / RUN_RECORD_FILE)
    for _, folder in folders:
        graph = Graph(folder.name, folder, run.id)
        run.incomplete |= build_graph(graph)
        run.graphs.append(graph)
    run.incomplete |= load_run_level_compile_error(run.graphs, run_dir, run.id)
    attach_trace_build_errors(run, run_dir.parent)  # a plain TORCH_COMPILE_DEBUG=1 run whose C++ build failed
    attach_logged_stacks(run, run_dir.parent)  # its kernels' full user stacks (callers), from the same trace
    return run


def read_rank(run: Run, path: Path) -> None:
    """The run's rank and world size from `lens/run.json` (lens_format/run_record.py). No file: no rank (a run of
    one process, an older compiler); a malformed one: no rank and a problem line naming the file."""
    if not path.is_file():
        return
    try:
        record = read_run_record(path)
    except ParseError as exc:
        run.run_problems.append(f"the run's rank is unknown: {exc}")
        return
    rank, size = record.rank, record.world_size
    if rank is None and size is None:
        return  # a process outside a process group
    if rank is None or size is None or size < 1 or not 0 <= rank < size:
        run.run_problems.append(f"the run's rank is unknown: {path}: rank {rank!r} of world_size {size!r} is not a "
                                "rank of a job (an integer from 0 to world_size - 1)")
        return
    run.rank, run.world_size = rank, size
