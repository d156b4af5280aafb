"""The per-compile structured-trace model: one FrameCompile per Dynamo compile and one TraceLog per log,
filled record by record through a table of handlers (record kind -> what it adds).
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lsp_server.parsers.torch_trace.payloads import FailedGuard, GraphBreak, parse_graph_break, parse_recompile_reasons
from lsp_server.parsers.torch_trace.reader import PayloadRef, SkippedRecord, StackFrame, TraceRecord

RESUME_NAME = re.compile(r"^torch_dynamo_resume_in_(.+?)_at_(\d+)$")
def resumed_function(name: str) -> tuple[str, int | None]:
    """(the user's function, the line of the graph break it resumes after) for Dynamo's continuation
    `torch_dynamo_resume_in_f_at_N` (a nested resume names its parent resume function: the outer N is the
    later break); (name, None) else."""
    m = RESUME_NAME.match(name)
    line = int(m.group(2)) if m else None
    while m:
        name = m.group(1)
        m = RESUME_NAME.match(name)
    return name, line


# A collective the compiled graph launches itself (functional collectives: FSDP2, compiled DDP, user code), as its
# output code calls it: `torch.ops._c10d_functional.all_reduce_.default(buf0, 'sum', '0')`; waits are no collective.
COLLECTIVE_CALL = re.compile(r"torch\.ops\.(?:_c10d_functional|_c10d_functional_autograd|c10d)\.(?P<op>\w+?)"
                             r"(?:\.default)?\(")
NOT_COLLECTIVES = frozenset({"wait_tensor"})
CompileKey = tuple[int | None, int, int]  # (compiled_autograd_id, frame_id, frame_compile_id)
# Logged once per graph Inductor compiles: a training step logs them for the forward, then the backward.
INDUCTOR_GRAPH_KINDS = frozenset({
    "fx_graph_runnable", "before_post_grad_graph", "inductor_post_grad_graph", "inductor_output_code",
    "inductor_provenance_tracking_node_mappings", "inductor_provenance_tracking_kernel_stack_traces",
})


@dataclass(slots=True)
class InductorGraph:
    """One graph Inductor compiled in a frame compile (the inference graph, or forward and backward apart):
    its output code (+ the cache file it was written to), post-grad graph and provenance, by record kind."""
    artifacts: dict[str, PayloadRef] = field(default_factory=dict)
    output_code_path: str | None = None

    @property
    def output_code(self) -> PayloadRef | None:
        return self.artifacts.get("inductor_output_code")

    def text(self, kind: str) -> str | None:
        """A payload of this graph read from the log, e.g. text("inductor_post_grad_graph")."""
        ref = self.artifacts.get(kind)
        return ref.text() if ref is not None else None


@dataclass(slots=True)
class FrameCompile:
    """One Dynamo compile of one frame (`compile_id` "frame/compile") on one rank."""
    source: str
    rank: int | None
    frame_id: int
    frame_compile_id: int
    compiled_autograd_id: int | None = None
    attempt: int = 0
    co_name: str | None = None
    co_filename: str | None = None
    co_firstlineno: int | None = None
    stack: tuple[StackFrame, ...] = ()
    graph_op_count: int | None = None
    graph_node_count: int | None = None
    guard_count: int | None = None
    compile_time_s: float | None = None
    recompile_reasons: list[FailedGuard] = field(default_factory=list)
    restart_reasons: list[str] = field(default_factory=list)
    fail_type: str | None = None
    fail_reason: str | None = None
    fail_file: str | None = None
    fail_line: int | None = None
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    inductor_graphs: list[InductorGraph] = field(default_factory=list)
    graph_hash: str | None = None
    artifacts: dict[str, PayloadRef] = field(default_factory=dict)  # other payloads by kind (last wins)
    finished: bool = False  # compilation_metrics seen
    # compilation_metrics' `compiler_config` (torch.compiler.config: dynamic_sources, job_id...), set values only
    config: dict[str, object] = field(default_factory=dict)
    collective_ops: tuple[int, tuple[str, ...]] | None = None  # (output codes read, their collectives)

    def collectives(self) -> tuple[str, ...]:
        """The collectives its graphs' output code launches, in call order (forward graph, then backward); read
        from the log once per set of output codes (more arrive while the log grows)."""
        codes = [g.output_code for g in self.inductor_graphs if g.output_code is not None]
        if self.collective_ops is None or self.collective_ops[0] != len(codes):
            found = []
            for ref in codes:
                try:
                    text = ref.text()
                except OSError:  # the log went away: the next update reads what replaced it
                    return ()
                found += [m["op"] for line in text.splitlines() if not line.lstrip().startswith("#")
                          for m in COLLECTIVE_CALL.finditer(line) if m["op"] not in NOT_COLLECTIVES]
            self.collective_ops = (len(codes), tuple(found))
        return self.collective_ops[1]

    @property
    def compile_id(self) -> str:
        base = f"{self.frame_id}/{self.frame_compile_id}"
        return base if self.compiled_autograd_id is None else f"!{self.compiled_autograd_id}/{base}"

    @property
    def is_resume(self) -> bool:
        """A continuation frame Dynamo made after a graph break (`torch_dynamo_resume_in_f_at_N`)."""
        return bool(self.co_name and RESUME_NAME.match(self.co_name))

    @property
    def function_name(self) -> str | None:
        """The user's function: resume frames are attributed to the function they continue."""
        return resumed_function(self.co_name)[0] if self.co_name else None

    @property
    def failed(self) -> bool:
        return self.fail_type is not None

    @property
    def has_graph(self) -> bool:
        return self.graph_op_count is not None and not self.failed

    def failure_headline(self) -> str:
        """`fail_type: first line of fail_reason` (plus the next line when the first ends in ':')."""
        lines = [ln.strip() for ln in (self.fail_reason or "").splitlines() if ln.strip()] or [""]
        head = 2 if lines[0].endswith(":") and len(lines) > 1 else 1
        return f"{self.fail_type}: {' '.join(lines[:head])}".rstrip(": ")

    @property
    def output_code(self) -> PayloadRef | None:
        """The first (inference or forward) graph's Inductor output code; see inductor_graphs for all."""
        return next((g.output_code for g in self.inductor_graphs if g.output_code is not None), None)

    @property
    def output_code_path(self) -> str | None:
        return next((g.output_code_path for g in self.inductor_graphs if g.output_code_path), None)

    def output_code_text(self) -> str | None:
        """The Inductor `output_code.py` text logged for this compile, read from the log on demand."""
        return self.output_code.text() if self.output_code is not None else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _on_metrics(fc: FrameCompile, rec: TraceRecord) -> None:
    m = rec.meta if isinstance(rec.meta, dict) else {}
    fc.finished = True
    fc.co_name = _str_or_none(m.get("co_name")) or fc.co_name
    fc.co_filename = _str_or_none(m.get("co_filename")) or fc.co_filename
    fc.co_firstlineno = _int_or_none(m.get("co_firstlineno")) or fc.co_firstlineno
    fc.graph_op_count = _int_or_none(m.get("graph_op_count"))
    fc.graph_node_count = _int_or_none(m.get("graph_node_count"))
    fc.guard_count = _int_or_none(m.get("guard_count"))
    seconds = m.get("entire_frame_compile_time_s")
    if not isinstance(seconds, (int, float)) and isinstance(m.get("duration_us"), (int, float)):
        seconds = m["duration_us"] / 1e6
    fc.compile_time_s = float(seconds) if isinstance(seconds, (int, float)) else None
    fc.fail_type = _str_or_none(m.get("fail_type"))
    fc.fail_reason = _str_or_none(m.get("fail_reason"))
    fc.fail_file = _str_or_none(m.get("fail_user_frame_filename"))
    fc.fail_line = _int_or_none(m.get("fail_user_frame_lineno"))
    fc.config = _set_values(m.get("compiler_config"))
    restarts = m.get("restart_reasons")
    fc.restart_reasons = [str(r) for r in restarts] if isinstance(restarts, (list, set)) else []
    # older torch put the reason here; 2.13 leaves it None and logs a `recompile_reasons` artifact
    reason = m.get("recompile_reason")
    if isinstance(reason, str) and reason and not fc.recompile_reasons:
        fc.recompile_reasons = parse_recompile_reasons(reason)


def _set_values(text: object) -> dict[str, object]:
    """A JSON object of settings (a string in the record) without its empty, false and null values."""
    try:
        values = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    if not isinstance(values, dict):
        return {}
    return {k: v for k, v in values.items() if v is not None and v is not False and v not in ("", [], {})}


def _on_start(fc: FrameCompile, rec: TraceRecord) -> None:
    fc.stack = rec.stack
    if rec.stack and not fc.finished:  # the compiled frame is the innermost one
        top = rec.stack[-1]
        fc.co_name, fc.co_filename, fc.co_firstlineno = top.name, top.file, top.line


def _on_graph_break(fc: FrameCompile, rec: TraceRecord) -> None:
    gb = parse_graph_break(rec.payload_text or "")
    if all((g.file, g.line, g.reason) != (gb.file, gb.line, gb.reason) for g in fc.graph_breaks):
        fc.graph_breaks.append(gb)


def _on_recompile(fc: FrameCompile, rec: TraceRecord) -> None:
    for guard in parse_recompile_reasons(rec.payload_text or ""):
        if guard not in fc.recompile_reasons:
            fc.recompile_reasons.append(guard)


def _on_output_code(fc: FrameCompile, rec: TraceRecord) -> None:
    graph = _keep_payload(fc, rec)
    meta = rec.meta if isinstance(rec.meta, dict) else {}
    if graph is not None:
        graph.output_code_path = _str_or_none(meta.get("filename")) or _str_or_none(meta.get("file_path"))


def _on_dynamo_graph(fc: FrameCompile, rec: TraceRecord) -> None:
    if rec.payload is not None:
        fc.graph_hash = rec.payload.md5 or f"{rec.payload.length}"
    _keep_payload(fc, rec)


def _keep_payload(fc: FrameCompile, rec: TraceRecord) -> InductorGraph | None:
    """Keep a payload's location; per-Inductor-graph kinds go to the current graph, or open the next one
    when the current graph already has that kind (the backward after the forward)."""
    if rec.payload is None:
        return None
    if rec.kind not in INDUCTOR_GRAPH_KINDS:
        fc.artifacts[rec.kind] = rec.payload
        return None
    if not fc.inductor_graphs or rec.kind in fc.inductor_graphs[-1].artifacts:
        fc.inductor_graphs.append(InductorGraph())
    fc.inductor_graphs[-1].artifacts[rec.kind] = rec.payload
    return fc.inductor_graphs[-1]


# record kind -> what it adds to its FrameCompile; other kinds with a payload are kept as artifacts
# when their tag is `artifact` or a graph/guards tag (PAYLOAD_TAGS), and otherwise only counted.
COMPILE_HANDLERS: dict[str, Callable[[FrameCompile, TraceRecord], None]] = {
    "compilation_metrics": _on_metrics,
    "dynamo_start": _on_start,
    "dynamo_graph_break_reason": _on_graph_break,
    "recompile_reasons": _on_recompile,
    "inductor_output_code": _on_output_code,
    "dynamo_output_graph": _on_dynamo_graph,
}
PAYLOAD_TAGS = frozenset({
    "artifact", "aot_forward_graph", "aot_backward_graph", "aot_inference_graph", "aot_joint_graph",
    "dynamo_cpp_guards_str", "dynamo_guards", "optimize_ddp_split_graph", "compiled_autograd_graph",
    "inductor_pre_grad_graph", "inductor_post_grad_graph",
})


@dataclass(slots=True)
class TraceLog:
    """Everything read from one log file (one process, normally one rank)."""
    path: str
    rank: int | None = None
    pid: int | None = None
    first_timestamp: str = ""
    last_timestamp: str = ""
    compiles: dict[CompileKey, FrameCompile] = field(default_factory=dict)
    kind_counts: dict[str, int] = field(default_factory=dict)
    record_count: int = 0
    skipped_count: int = 0
    skipped: list[SkippedRecord] = field(default_factory=list)
    torch_version: PayloadRef | None = None

    def add(self, rec: TraceRecord) -> None:
        self.record_count += 1
        self.kind_counts[rec.kind] = self.kind_counts.get(rec.kind, 0) + 1
        self.rank = rec.rank if rec.rank is not None else self.rank
        self.pid = self.pid or rec.pid
        self.first_timestamp = self.first_timestamp or rec.timestamp
        self.last_timestamp = rec.timestamp or self.last_timestamp
        if rec.kind == "torch_version":
            self.torch_version = rec.payload
        key = rec.compile_key
        if key is None:
            return
        fc = self.compiles.get(key)
        if fc is None:
            fc = self.compiles[key] = FrameCompile(rec.source, rec.rank, key[1], key[2], key[0])
        fc.rank = rec.rank if rec.rank is not None else fc.rank
        fc.attempt = max(fc.attempt, rec.attempt or 0)
        handler = COMPILE_HANDLERS.get(rec.kind)
        if handler is not None:
            handler(fc, rec)
        elif rec.tag in PAYLOAD_TAGS:
            _keep_payload(fc, rec)

    def torch_version_text(self) -> str | None:
        """`pytorch_version` from the log's `torch_version` artifact (read on demand)."""
        if self.torch_version is None:
            return None
        try:
            value = json.loads(self.torch_version.text())
        except (OSError, ValueError):
            return None
        return value.get("pytorch_version") if isinstance(value, dict) else None
