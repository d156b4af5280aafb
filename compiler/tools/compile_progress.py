"""Live progress of `kernel-lens compile`: a thread in the CLI process polls the debug run folders the script
creates and prints one plain line per graph as its files land; the CLI also polls before relaying each line the
script prints, so a graph's line comes before the output of its call. The script itself is left untouched."""
from __future__ import annotations

import glob
import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from lens_format import files
from lens_format.errors import ParseError
from lens_format.jsonio import read_json_object
from lens_format.kernel_map import KernelMap
from lens_format.notes import read_notes

POLL_S = 0.25
SLOW_AFTER_S = 5.0  # a graph still compiling after this long is named, so a long run never looks stuck
SLOW_EVERY_S = 30.0


@dataclass
class GraphFolder:
    """One graph folder of a run: ours (`lens/graph_N`) or real Inductor's (`torchinductor/<name>`)."""
    path: str
    first_seen: float
    done: bool = False
    next_note: float = SLOW_AFTER_S

    @property
    def name(self) -> str:
        return os.path.basename(self.path.rstrip(os.sep))


def landed_as(folder: str) -> str | None:
    """What a graph folder's files say it became once compiled ("forward", "runs eagerly", "inductor"…),
    None while its files are still being written. Our files are written atomically, so a file seen is whole."""
    kernel_map = Path(folder) / files.KERNEL_MAP
    if kernel_map.exists():
        try:
            return KernelMap.from_json(read_json_object(kernel_map, require_version=False)).graph_kind
        except ParseError:
            return None
    notes = Path(folder) / files.NOTES
    if notes.exists():  # a graph that falls back to eager writes its reason and no kernel map
        try:
            return "runs eagerly" if read_notes(notes).eager is not None else None
        except ParseError:
            return None
    if os.path.basename(os.path.dirname(folder.rstrip(os.sep))) == "torchinductor":
        return "inductor" if os.path.exists(os.path.join(folder, "output_code.py")) else None
    return None


def _natural(path: str) -> list:
    """graph_2 before graph_10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", path)]


@dataclass
class CompileProgress:
    """Polls `<root>/run_*` folders not in `existing_runs` and reports each graph as it lands.
    Use as a context manager around the child process: leaving it polls once more, so every graph the
    script compiled is reported before the CLI's summary."""
    root: str
    existing_runs: set[str]
    out: TextIO = field(default_factory=lambda: sys.stderr)
    clock: Callable[[], float] = time.monotonic
    graphs: dict[str, GraphFolder] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)  # the thread's polls and the relay's (cli.py)
    _thread: threading.Thread | None = None

    def __enter__(self) -> "CompileProgress":
        self._thread = threading.Thread(target=self._loop, name="kernel-lens-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.poll()

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.poll()
            except OSError:  # a folder removed under us: the next poll sees the new state
                pass

    def completed(self) -> int:
        return sum(1 for g in self.graphs.values() if g.done)

    def poll(self) -> None:
        with self._lock:
            self._poll()

    def _poll(self) -> None:
        now = self.clock()
        runs = sorted(set(glob.glob(os.path.join(self.root, "run_*"))) - self.existing_runs)
        for run in runs:
            found = [f for sub in ("lens", "torchinductor") for f in glob.glob(os.path.join(run, sub, "*", ""))]
            for folder in sorted(found, key=_natural):
                self.graphs.setdefault(folder, GraphFolder(folder, now))
        for graph in self.graphs.values():
            if graph.done:
                continue
            kind = landed_as(graph.path)
            if kind is not None:
                graph.done = True
                verb = "" if kind == "runs eagerly" else "compiled "
                what = "runs eagerly (no generated code)" if kind == "runs eagerly" else f"({kind})"
                self._say(f"{verb}{graph.name} {what}; {self.completed()} graph(s) so far")
            elif now - graph.first_seen >= graph.next_note:
                graph.next_note += SLOW_EVERY_S
                self._say(f"compiling {graph.name}... ({now - graph.first_seen:.0f} s so far; "
                          f"{self.completed()} graph(s) done)")

    def _say(self, text: str) -> None:
        # plain whole lines: the script's own stderr is relayed to the same stream between them
        print(f"kernel-lens: {text}", file=self.out, flush=True)
