"""The callers of a real Inductor run's nodes: Inductor's debug files keep only each FX node's innermost frame
(`# File:`), but provenance tracking (on under TORCH_COMPILE_DEBUG=1) logs every kernel's full user stacks to
the structured trace (`inductor_provenance_tracking_kernel_stack_traces`): the process's log in
`torch_compile_debug/tlparse/`, or in a `torch_trace/` folder beside the debug dir (TORCH_TRACE=./torch_trace); a
trace run has the record in its graph folder. A graph folder is matched to its log record by its output code
(the record's md5 is that of output_code.py), and each kernel's stacks give the nodes of the kernel on a stack's
innermost line the stack's outer frames, the lines whose calls reached them (the index's "via calls").

A graph none of whose records were found keeps `callers_recorded` False: the editor then says its calls were not
recorded, never an empty total.
"""
from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from lsp_server.loading.inductor_build_errors import TLPARSE_DIR
from lsp_server.model import Graph, Run, SourceLocation, normalize_path
from lsp_server.parsers import ParseError
from lsp_server.parsers.provenance import KernelStacks, kernel_stacks_from_text
from lsp_server.parsers.torch_trace.compiles import TraceLog
from lsp_server.parsers.torch_trace.reader import PayloadRef, TraceReader

STACKS_RECORD = "inductor_provenance_tracking_kernel_stack_traces"
TRACE_BESIDE = "torch_trace"  # TORCH_TRACE=./torch_trace run beside the debug dir


def apply_kernel_stacks(graph: Graph, stacks: list[KernelStacks] | None) -> None:
    """Each kernel's nodes on a stack's innermost line get the stack's outer frames (outermost first, before the
    node's own line); the graph's callers are recorded from now on, even where no node had one."""
    if stacks is None:
        return
    graph.callers_recorded = True
    callers: dict[str, list[SourceLocation]] = {}
    for entry in stacks:
        kernels = [k for k in graph.kernels if k.name == entry.kernel
                   and (entry.handle is None or k.handle is None or k.handle == entry.handle)]
        for stack in entry.stacks:
            frames = [SourceLocation(normalize_path(f.file), f.line, f.function, f.code) for f in stack]
            own = frames[-1]
            for kernel in kernels:
                for name in kernel.nodes:
                    node = graph.nodes.get(name)
                    if node is None or node.source is None or (node.source.file, node.source.line) != \
                            (own.file, own.line):
                        continue
                    known = callers.setdefault(name, [])
                    known += [f for f in frames[:-1] if f not in known and f != node.source]
    for name, outer in callers.items():
        node = graph.nodes[name]
        if len(node.frames) <= 1:  # Inductor's readable graph: the node's own line only
            node.frames = outer + [node.source] if node.source is not None else outer


class StackLogs:
    """One TraceReader and TraceLog per structured-trace log (each call reads only appended bytes)."""

    def __init__(self) -> None:
        self.readers: dict[str, TraceReader] = {}
        self.logs: dict[str, TraceLog] = {}
        self.lock = threading.Lock()

    def records_for(self, folders: list[Path], pid: int) -> dict[str, PayloadRef]:
        """Output code md5 → its graph's kernel stack traces record, in the logs of process `pid`."""
        found: dict[str, PayloadRef] = {}
        with self.lock:
            for log in logs_in(folders):
                reader = self.readers.setdefault(log, TraceReader(log))
                generation = reader.generation
                records = reader.read_new()
                if reader.generation != generation or log not in self.logs:  # replaced or truncated: read anew
                    self.logs[log] = TraceLog(log)
                trace = self.logs[log]
                for record in records:
                    trace.add(record)
                if trace.pid != pid:
                    continue
                for compile_ in trace.compiles.values():
                    for graph in compile_.inductor_graphs:
                        code, stacks = graph.output_code, graph.artifacts.get(STACKS_RECORD)
                        if code is not None and code.md5 and stacks is not None:
                            found[code.md5] = stacks
        return found


def logs_in(folders: list[Path]) -> list[str]:
    found: list[str] = []
    for folder in folders:
        try:
            found += sorted(str(p) for p in folder.glob("*.log"))
        except OSError:
            continue
    return found


LOGS = StackLogs()


def attach_logged_stacks(run: Run, debug_dir: Path) -> None:
    """A real Inductor run's graphs whose callers no file of theirs recorded: from the process's structured trace."""
    graphs = [g for g in run.graphs if not g.callers_recorded and g.output_code.is_file()]
    if run.kind != "inductor" or run.pid is None or not graphs:
        return
    records = LOGS.records_for([debug_dir / TLPARSE_DIR, debug_dir.parent / TRACE_BESIDE], run.pid)
    if not records:
        return
    for graph in graphs:
        try:
            digest = hashlib.md5(graph.output_code.read_bytes(), usedforsecurity=False).hexdigest()
        except OSError:
            continue
        record = records.get(digest)
        if record is None:
            continue
        try:
            apply_kernel_stacks(graph, kernel_stacks_from_text(record.text(), Path(record.path)))
        except (ParseError, OSError, UnicodeError) as exc:
            graph.problems.append(f"{record.path}: {STACKS_RECORD}: {exc}")
