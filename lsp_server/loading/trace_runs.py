"""Turns the Inductor graphs a structured-trace log holds into an index `Run`: each graph's logged files are
written (atomically, once) into a graph folder the ordinary graph builder reads, so a run with only a trace
still has kernels, FX nodes and source lines."""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path

from lsp_server.loading.run_loader import load_run
from lsp_server.model import Run
from lsp_server.parsers.provenance import KERNEL_STACKS_FILE
from lsp_server.parsers.torch_trace.compiles import FrameCompile, TraceLog

# record kind → the debug-directory file it is (before_post_grad_graph is what fx_graph_readable.py prints)
ARTIFACT_FILES: dict[str, str] = {
    "inductor_output_code": "output_code.py",
    "before_post_grad_graph": "fx_graph_readable.py",
    "inductor_post_grad_graph": "fx_graph_transformed.py",
    "fx_graph_runnable": "fx_graph_runnable.py",
    "inductor_provenance_tracking_node_mappings": "inductor_provenance_tracking_node_mappings.json",
    "inductor_provenance_tracking_kernel_stack_traces": KERNEL_STACKS_FILE,
}
GRAPHS_SUBFOLDER = "torchinductor"  # so run_loader reads the folders as real Inductor graphs
RUN_KIND = "trace"


def default_cache_dir() -> Path:
    return Path(os.environ.get("KERNEL_LENS_TRACE_CACHE") or Path(tempfile.gettempdir()) / "kernel-lens-traces")


CACHE_MAX_AGE_DAYS = 7.0  # a log's folder untouched this long (its log gone or idle) is removed at start-up
_PRUNED: set[Path] = set()  # cache folders this process already pruned (the server builds two loaders)


def prune_cache(cache_dir: Path, max_age_days: float) -> list[Path]:
    """Remove the cache's run folders that no server wrote to for `max_age_days`; returns them."""
    cutoff = time.time() - max_age_days * 86400
    removed = []
    try:
        entries = list(cache_dir.iterdir())
    except OSError:
        return removed
    for entry in entries:
        try:
            newest = max([entry.stat().st_mtime] + [p.stat().st_mtime for p in entry.rglob("*")])
        except OSError:
            continue  # being written or removed by another server right now
        if entry.is_dir() and newest < cutoff:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def graph_folder_name(fc: FrameCompile, index: int) -> str:
    """`frame_0.1_graph_0`: frame 0, its compile 1, the first Inductor graph (forward/inference)."""
    autograd = "" if fc.compiled_autograd_id is None else f"ca{fc.compiled_autograd_id}_"
    return f"frame_{autograd}{fc.frame_id}.{fc.frame_compile_id}_graph_{index}"


class TraceRunWriter:
    """Writes logs' Inductor graphs under `cache_dir/<log hash>/` and loads them as trace runs."""

    def __init__(self, cache_dir: Path, max_age_days: float = CACHE_MAX_AGE_DAYS) -> None:
        self.cache_dir = cache_dir
        self.written: dict[Path, set[str]] = {}  # graph folder → record kinds written into it
        if cache_dir not in _PRUNED:
            _PRUNED.add(cache_dir)
            prune_cache(cache_dir, max_age_days)

    def run_dir(self, log_path: str) -> Path:
        digest = hashlib.sha1(log_path.encode("utf-8", "replace")).hexdigest()[:12]
        return self.cache_dir / f"{Path(log_path).stem}-{digest}"

    def update(self, log: TraceLog) -> tuple[Run | None, bool]:
        """Write what the log gained; returns its run (None: no Inductor graph) and whether files changed."""
        run_dir = self.run_dir(log.path)
        graphs_dir = run_dir / GRAPHS_SUBFOLDER
        expected: set[Path] = set()
        changed = False
        for fc in sorted(log.compiles.values(), key=lambda c: (c.compiled_autograd_id or -1, c.frame_id,
                                                                c.frame_compile_id)):
            for number, graph in enumerate(fc.inductor_graphs):
                if graph.output_code is None:
                    continue
                folder = graphs_dir / graph_folder_name(fc, number)
                expected.add(folder)
                done = self.written.setdefault(folder, set())
                for kind, ref in graph.artifacts.items():
                    name = ARTIFACT_FILES.get(kind)
                    if name is None or kind in done:
                        continue
                    try:
                        write_atomically(folder / name, ref.text())
                    except OSError:
                        continue  # the log moved on or the cache is unwritable: retried on the next change
                    done.add(kind)
                    changed = True
        changed |= self.drop_folders_except(graphs_dir, expected)
        if not expected:
            return None, changed
        run = load_run(run_dir, f"trace:{Path(log.path).stem}")
        if run is not None:
            run.kind, run.pid = RUN_KIND, log.pid
            run.time = log_time(log.path)
        return run, changed

    def drop_folders_except(self, graphs_dir: Path, keep: set[Path]) -> bool:
        """A log that restarted no longer has some graphs: remove their folders."""
        stale = [f for f in self.written if f.parent == graphs_dir and f not in keep]
        for folder in stale:
            shutil.rmtree(folder, ignore_errors=True)
            self.written.pop(folder, None)
        return bool(stale)

    def forget(self, log_path: str) -> Path:
        """The log was deleted: remove its folder; returns the run folder (for the index)."""
        run_dir = self.run_dir(log_path)
        for folder in [f for f in self.written if run_dir in f.parents]:
            self.written.pop(folder, None)
        shutil.rmtree(run_dir, ignore_errors=True)
        return run_dir


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    staging.write_text(text, encoding="utf-8")
    os.replace(staging, path)


def log_time(path: str) -> datetime:
    try:
        return datetime.fromtimestamp(os.stat(path).st_mtime)
    except OSError:
        return datetime.fromtimestamp(0)
