"""Streaming reader for PyTorch structured-trace logs (`TORCH_TRACE=dir`, what tlparse reads).

Each record is a glog prefix, a JSON envelope with one tagged key, then its payload on tab-indented lines.
The reader returns only what was appended since its last call; it never imports or executes what it reads.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Envelope keys that are context, not the record's tag (torch/_logging/_internal.py `reserved_names`).
ENVELOPE_KEYS = frozenset({
    "rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "severity", "timestamp",
    "pathname", "thread", "subgraph_name", "has_payload", "stack",
})
# Payloads decoded as soon as they are read (small, needed for diagnostics); the rest stay on disk
# as PayloadRef so a 200 MB trace does not live in memory.
EAGER_PAYLOADS = frozenset({"dynamo_graph_break_reason", "recompile_reasons"})
# `[rank0]:` (optional) `V1122 18:39:30.665000 3959 torch/_dynamo/utils.py:2350]` then optional ` [..]` tags.
GLOG_PREFIX = re.compile(
    rb"(?:\[rank(\d+)\]:)?[VIWEC](\d{4} \d\d:\d\d:\d\d\.\d+) +(\d+) [^\]\n]*?:\d+\](?: \[[^\]\n]*\])* ")
RECORD_START = re.compile(rb"\n(?=[^\t])")
RANK_IN_NAME = re.compile(r"rank_(\d+)(?=[_.])")
READ_CHUNK = 16 << 20
MAX_PENDING = 256 << 20  # a "record" larger than this without a newline is garbage, not a slow writer
MAX_SKIPS_KEPT = 50
JSON = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class StackFrame:
    """One frame of a user or compile stack (filenames already resolved through `str` records)."""
    file: str
    line: int
    name: str
    code: str | None = None


@dataclass(frozen=True, slots=True)
class PayloadRef:
    """Where a record's payload lies in its log; read on demand (logs are append-only)."""
    path: str
    offset: int
    length: int
    md5: str | None = None

    def text(self) -> str:
        """The payload as the program logged it (tab indentation removed)."""
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            return decode_payload(f.read(self.length))


@dataclass(frozen=True, slots=True)
class SkippedRecord:
    """A stretch of a log that is not a readable record: where it is and why it was skipped."""
    path: str
    line: int
    offset: int
    reason: str


@dataclass(slots=True)
class TraceRecord:
    """One structured-trace record. `kind` is the artifact name for `artifact` records, else the tag."""
    source: str
    offset: int
    tag: str
    kind: str
    meta: Any
    rank: int | None = None
    pid: int | None = None
    timestamp: str = ""
    frame_id: int | None = None
    frame_compile_id: int | None = None
    attempt: int | None = None
    compiled_autograd_id: int | None = None
    stack: tuple[StackFrame, ...] = ()
    payload: PayloadRef | None = None
    payload_text: str | None = None

    @property
    def compile_key(self) -> tuple[int | None, int, int] | None:
        """(compiled_autograd_id, frame_id, frame_compile_id), or None for records outside a compile."""
        if self.frame_id is None or self.frame_compile_id is None:
            return None
        return (self.compiled_autograd_id, self.frame_id, self.frame_compile_id)

    def payload_str(self) -> str | None:
        """The payload text, read from disk when it was not decoded eagerly."""
        if self.payload_text is not None:
            return self.payload_text
        return self.payload.text() if self.payload is not None else None


def decode_payload(raw: bytes) -> str:
    """Undo the logger's framing: every payload line is written as '\\t' + line."""
    text = raw.decode("utf-8", "replace")
    return text[1:].replace("\n\t", "\n") if text.startswith("\t") else text.replace("\n\t", "\n")


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class TraceReader:
    """Reads one log incrementally: keeps the byte offset of the first unconsumed record.

    An incomplete record at EOF stays pending and is re-read when more bytes arrive. If the file shrinks
    or is replaced, the reader starts over and bumps `generation` (callers drop what they had).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = str(path)
        m = RANK_IN_NAME.search(Path(self.path).name)
        self.rank_from_name = int(m.group(1)) if m else None  # torch names ranked logs `..._rank_N_...`
        self.generation = 0
        self.records_read = 0
        self.skipped_count = 0
        self.skipped: list[SkippedRecord] = []
        self._reset_state()

    def _reset_state(self) -> None:
        self._offset = 0          # absolute offset of the first byte not yet turned into a record
        self._line = 1            # line number at _offset
        self._pending = b""       # bytes from _offset that were read but hold no complete record yet
        self._strings: dict[int, str] = {}
        self._identity: tuple[int, int] | None = None
        self._head = b""
        self._rank = self.rank_from_name  # the log's rank, once a record states it

    def _restart(self) -> None:
        self._reset_state()
        self.generation += 1
        self.records_read = 0
        self.skipped_count = 0
        self.skipped = []

    @property
    def offset(self) -> int:
        """Bytes consumed as complete records (or skipped garbage)."""
        return self._offset

    def read_new(self) -> list[TraceRecord]:
        """Records appended since the last call. Never raises on bad content; a missing file reads empty."""
        return [rec for batch in self.read_batches() for rec in batch]

    def read_batches(self) -> Iterator[list[TraceRecord]]:
        """Like read_new, one batch per chunk read, so a consumer never holds a whole large log's records."""
        try:
            st = os.stat(self.path)
            with open(self.path, "rb") as f:
                if self._was_replaced(f, st):
                    self._restart()
                f.seek(self._offset + len(self._pending))
                while chunk := f.read(READ_CHUNK):
                    yield self._consume(self._pending + chunk, at_eof=False)
                yield self._consume(self._pending, at_eof=True)
                if not self._head:
                    f.seek(0)
                    self._head = f.read(256)
                    self._identity = (st.st_dev, st.st_ino)
        except OSError:
            return  # vanished or unreadable: what was read so far still counts

    def finish(self) -> list[TraceRecord]:
        """The writer is gone: turn what is still pending into a record if it parses, else count it skipped."""
        return self._consume(self._pending, final=True)

    def _was_replaced(self, f: Any, st: os.stat_result) -> bool:
        if not self._head:
            return self._offset > 0 and st.st_size < self._offset
        if (st.st_dev, st.st_ino) != self._identity or st.st_size < self._offset + len(self._pending):
            return True
        return f.read(len(self._head)) != self._head

    def _consume(self, buf: bytes, *, at_eof: bool = False, final: bool = False) -> list[TraceRecord]:
        """Parse every complete record in `buf` (which starts at self._offset); keep the rest pending."""
        out: list[TraceRecord] = []
        starts = [0] + [m.end() for m in RECORD_START.finditer(buf)]
        base = self._offset
        for seg_start, seg_end in zip(starts, starts[1:]):
            self._emit(buf, seg_start, seg_end, base, out)
        last = buf[starts[-1]:]
        if last and (final or (at_eof and self._is_complete(last))):
            if final and not self._is_complete(last):
                self._skip(base + starts[-1], "truncated record at end of log")
                self._line += last.count(b"\n")
            else:
                self._emit(buf, starts[-1], len(buf), base, out)
            last = b""
        elif len(last) > MAX_PENDING:
            self._skip(base + starts[-1], "record larger than MAX_PENDING without a newline")
            self._line += last.count(b"\n")
            last = b""
        self._offset = base + len(buf) - len(last)
        self._pending = last
        self.records_read += len(out)
        return out

    def _is_complete(self, seg: bytes) -> bool:
        """A record at EOF is complete when its line ended and its payload matches `has_payload`."""
        if not seg.endswith(b"\n"):
            return False
        header, _, payload = seg.partition(b"\n")
        m = re.search(rb'"has_payload": "([0-9a-f]{32})"', header)
        if m is None:
            return not payload
        text = decode_payload(payload[:-1]) if payload else ""
        return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest() == m.group(1).decode()

    def _skip(self, offset: int, reason: str) -> None:
        self.skipped_count += 1
        if len(self.skipped) < MAX_SKIPS_KEPT:
            self.skipped.append(SkippedRecord(self.path, self._line, offset, reason))

    def _emit(self, buf: bytes, start: int, end: int, base: int, out: list[TraceRecord]) -> None:
        record = self._parse(buf, start, end, base)
        self._line += buf.count(b"\n", start, end)
        if record is not None:
            out.append(record)

    def _parse(self, buf: bytes, start: int, end: int, base: int) -> TraceRecord | None:
        """The record in buf[start:end] (indexes, so payload bytes are never copied unless decoded)."""
        offset = base + start
        nl = buf.find(b"\n", start, end)
        header_end = end if nl < 0 else nl
        m = GLOG_PREFIX.match(buf, start, header_end)
        if m is None:
            self._skip(offset, "line is not a glog-prefixed record")
            return None
        try:
            envelope = JSON.decode(buf[m.end():header_end].decode("utf-8"))
        except (ValueError, RecursionError):
            self._skip(offset, "envelope is not valid JSON")
            return None
        tag = next((k for k in envelope if k not in ENVELOPE_KEYS), None) if isinstance(envelope, dict) else None
        if tag is None:
            self._skip(offset, "envelope has no tag")
            return None
        meta = envelope[tag]
        if tag == "str":
            self._intern(meta)
            return None
        kind = meta.get("name") if tag == "artifact" and isinstance(meta, dict) else tag
        kind = kind if isinstance(kind, str) else tag
        payload_start = end if nl < 0 else nl + 1
        payload_end = end - 1 if end > payload_start and buf[end - 1] == 10 else end
        record = TraceRecord(
            source=self.path, offset=offset, tag=tag, kind=kind, meta=meta,
            rank=self._rank_of(envelope, m),
            pid=int(m.group(3)), timestamp=m.group(2).decode("ascii"),
            frame_id=_as_int(envelope.get("frame_id")),
            frame_compile_id=_as_int(envelope.get("frame_compile_id")),
            attempt=_as_int(envelope.get("attempt")),
            compiled_autograd_id=_as_int(envelope.get("compiled_autograd_id")),
        )
        if isinstance(meta, dict) and isinstance(meta.get("stack"), list):
            record.stack = self.resolve_stack(meta["stack"])
        if payload_end > payload_start:
            if kind in EAGER_PAYLOADS:
                record.payload_text = decode_payload(buf[payload_start:payload_end])
            else:
                md5 = envelope.get("has_payload")
                record.payload = PayloadRef(self.path, base + payload_start, payload_end - payload_start,
                                            md5 if isinstance(md5, str) else None)
        return record

    def _rank_of(self, envelope: dict[str, Any], prefix: re.Match[bytes]) -> int | None:
        """The envelope's `rank`; records logged without context inherit the log's rank."""
        rank = _as_int(envelope.get("rank"))
        if rank is None and prefix.group(1):
            rank = int(prefix.group(1))
        if rank is not None:
            self._rank = rank
        return self._rank

    def _intern(self, meta: Any) -> None:
        if isinstance(meta, list) and len(meta) == 2 and isinstance(meta[0], str) and _as_int(meta[1]) is not None:
            self._strings[meta[1]] = meta[0]

    def resolve_stack(self, frames: list[Any]) -> tuple[StackFrame, ...]:
        """Turn `[{"line", "name", "filename": <interned id or str>, "loc"?}]` into StackFrames."""
        resolved = []
        for fr in frames:
            if not isinstance(fr, dict):
                continue
            name = fr.get("filename")
            file = self._strings.get(name, f"<interned {name}>") if isinstance(name, int) else str(name)
            resolved.append(StackFrame(file, _as_int(fr.get("line")) or 0, str(fr.get("name", "")),
                                       fr.get("loc") if isinstance(fr.get("loc"), str) else None))
        return tuple(resolved)


def find_trace_logs(roots: list[Path]) -> list[Path]:
    """Every `*.log` under the roots (TORCH_TRACE dirs hold one per rank), sorted for a stable rank order."""
    found: set[Path] = set()
    for root in roots:
        if root.is_file():
            found.add(root)
        elif root.is_dir():
            found.update(p for p in root.rglob("*.log") if p.is_file())
    return sorted(found)
