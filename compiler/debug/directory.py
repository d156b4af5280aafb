"""The debug directory (docs/debug-directory.md): one writer method per file, written atomically.
A failure while writing debug output (no folder can be made, a file where a folder should be, a read-only
disk, data JSON cannot hold) is logged once per cause and never breaks compilation."""
from __future__ import annotations

import datetime
import json
import logging
import os
import tempfile

from compiler import config
from lens_format.run_record import FILE as RUN_RECORD_FILE
from lens_format.run_record import RunRecord

log = logging.getLogger(__name__)
_RUN_DIRS: dict[str | None, str] = {}
_WARNED: set[str] = set()  # causes already logged: a broken folder is said once, not once per file


def _warn_once(cause: str, what: str, error: BaseException) -> None:
    if cause in _WARNED:
        log.debug("kernel-lens: %s: %s", what, error)
        return
    _WARNED.add(cause)
    log.warning("kernel-lens: %s: %s: %s (compiling goes on without it)", what, type(error).__name__, error)


def run_dir() -> str:
    """`<root>/run_<timestamp>-pid_<pid>`, one per process and root, made on first use."""
    root = config.debug_dir_root
    path = _RUN_DIRS.get(root)
    if path is None or not os.path.isdir(path):
        if root:
            stamp = datetime.datetime.now().strftime("%Y_%m_%d_%H_%M_%S_%f")
            path = os.path.join(root, f"run_{stamp}-pid_{os.getpid()}")
        else:  # share the run folder Dynamo/Inductor use (TORCH_COMPILE_DEBUG_DIR), as Inductor does
            from torch._dynamo.utils import get_debug_dir
            path = get_debug_dir()
        os.makedirs(path, exist_ok=True)
        _RUN_DIRS[root] = path
    return path


def write_atomic(path: str, data: str | bytes) -> None:
    """Write a file whole or not at all (a reader never sees half of it): text, or bytes."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    os.replace(tmp, path)


_RUN_RECORDS: dict[str, RunRecord] = {}  # lens folder -> the process record written there


def process_record() -> RunRecord:
    """This process as a run's `lens/run.json` records it (lens_format/run_record.py): its pid and, in a distributed
    job (DDP, FSDP: each rank a process with a run folder of its own), its rank and the world size."""
    record = RunRecord(os.getpid())
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            record.rank, record.world_size = dist.get_rank(), dist.get_world_size()
            record.backend = str(dist.get_backend())
    except (ImportError, RuntimeError, ValueError):  # (a process group being torn down: no rank to record)
        pass
    return record


def _write_run_record(lens_folder: str) -> None:
    """`lens/run.json` beside the graphs' folders, written again when the process joins a process group later."""
    record = process_record()
    if _RUN_RECORDS.get(lens_folder) == record:
        return
    try:
        write_atomic(os.path.join(lens_folder, RUN_RECORD_FILE), json.dumps(record.to_json(), indent=1) + "\n")
        _RUN_RECORDS[lens_folder] = record
    except OSError as e:
        _warn_once(f"write:{lens_folder}", f"could not write {lens_folder}/{RUN_RECORD_FILE}", e)


class DebugDir:
    """Files of one graph's folder `<run>/lens/<graph_id>/`."""

    def __init__(self, graph_id: str, path: str | None = None):
        """`path`: None where no run folder could be made (then every writer is a no-op)."""
        self.graph_id = graph_id
        if path is None:
            try:
                path = os.path.join(run_dir(), "lens", graph_id)
            except OSError as e:
                _warn_once(f"run_dir:{config.debug_dir_root}", "no debug directory could be made", e)
            else:
                _write_run_record(os.path.dirname(path))
        self.path: str | None = path

    def _write(self, name: str, text: str) -> str | None:
        if self.path is None:
            return None
        target = os.path.join(self.path, name)
        try:
            write_atomic(target, text)
            return target
        except OSError as e:
            _warn_once(f"write:{self.path}", f"could not write debug file {target}", e)
            return None

    def _write_json(self, name: str, data: dict) -> str | None:
        try:
            text = json.dumps(data, indent=1) + "\n"
        except (TypeError, ValueError) as e:  # a value JSON cannot hold: the file is left out, not the compile
            _warn_once(f"json:{name}", f"could not write debug file {name} of {self.graph_id}", e)
            return None
        return self._write(name, text)

    def fx_graph_readable(self, text: str) -> None:
        self._write("fx_graph_readable.py", text)

    def fx_graph_runnable(self, text: str) -> None:
        self._write("fx_graph_runnable.py", text)

    def fx_graph_transformed(self, text: str) -> None:
        self._write("fx_graph_transformed.py", text)

    def ir_pre_fusion(self, text: str) -> None:
        self._write("ir_pre_fusion.txt", text)

    def ir_post_fusion(self, text: str) -> None:
        self._write("ir_post_fusion.txt", text)

    def output_code(self, text: str) -> None:
        self._write("output_code.py", text)

    def kernel_map(self, data: dict) -> None:
        self._write_json("kernel_map.json", data)

    def symbols(self, data: dict) -> None:
        self._write_json("symbols.json", data)

    def compile_error(self, data: dict) -> None:
        self._write_json("compile_error.json", data)

    def accuracy(self, data: dict) -> None:
        self._write_json("accuracy.json", data)

    def profile(self, data: dict) -> None:
        self._write_json("profile.json", data)

    def trace(self, data: dict) -> None:
        self._write_json("trace.json", data)

    def tensors(self, relpath: str, obj) -> str | None:
        """`tensors/...` (config.save_tensors): `obj` in torch.save format, written atomically."""
        import torch
        if self.path is None:
            return None
        target = os.path.join(self.path, relpath)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                torch.save(obj, f)
            os.replace(tmp, target)
            return target
        except (OSError, RuntimeError) as e:
            _warn_once(f"write:{self.path}", f"could not write debug file {target}", e)
            return None

    def tensors_manifest(self, data: dict, readme: str) -> None:
        self._write_json("tensors/manifest.json", data)
        self._write("tensors/README.txt", readme)

    def why(self, data: dict) -> None:
        self._write_json("why.json", data)

    def kernel_plans(self, data: dict | None) -> None:
        if data is not None:
            self._write_json("kernel_plans.json", data)

    def vectorization(self, lines: list[str]) -> None:
        head = ("# Loops g++ left scalar (-fopt-info-vec-missed): kernel:output_code.py line: reason  | code\n"
                if lines else "# g++ vectorized every kernel loop (-fopt-info-vec-missed reported nothing)\n")
        self._write("vectorization.txt", head + "".join(line + "\n" for line in lines))

    def notes(self, lines: list[str]) -> None:
        if lines:
            self._write("notes.txt", "\n".join(lines) + "\n")
