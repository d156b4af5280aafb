"""A live set of structured-trace logs: one TraceReader per log under some folders, feeding one TraceSummary.

`refresh()` reads only appended bytes; a log that was truncated or replaced is dropped and re-read.
"""
from __future__ import annotations

import os
from pathlib import Path

from lsp_server.parsers.torch_trace.reader import TraceReader, find_trace_logs
from lsp_server.parsers.torch_trace.summary import TraceSummary


class TraceDirectory:
    """The logs under `roots` (TORCH_TRACE folders or single log files) and their summary."""

    def __init__(self, roots: list[str | os.PathLike[str]]) -> None:
        self.roots = [Path(r) for r in roots]
        self.summary = TraceSummary()
        self.readers: dict[str, TraceReader] = {}

    def refresh(self) -> list[str]:
        """Discover new logs and read what every log gained since the last call; returns changed paths."""
        for path in find_trace_logs(self.roots):
            self.readers.setdefault(str(path), TraceReader(path))
        return [p for p in list(self.readers) if self.refresh_log(p)]

    def refresh_log(self, path: str | os.PathLike[str]) -> bool:
        """Read one log's new bytes into the summary (e.g. on a watcher event); True if anything changed."""
        key = str(path)
        reader = self.readers.setdefault(key, TraceReader(key))
        generation, skipped, read = reader.generation, reader.skipped_count, 0
        for batch in reader.read_batches():
            if reader.generation != generation and read == 0:
                self.summary.drop_log(key)  # truncated or replaced: its old records are void
            self.summary.add(batch)
            read += len(batch)
        restarted = reader.generation != generation
        if restarted and read == 0:
            self.summary.drop_log(key)
        if reader.skipped_count != skipped or restarted:
            self.summary.note_skipped(key, reader.skipped_count, reader.skipped)
        return bool(read) or restarted or reader.skipped_count != skipped

    def forget(self, path: str | os.PathLike[str]) -> None:
        """The log was deleted."""
        self.readers.pop(str(path), None)
        self.summary.drop_log(str(path))

    def finish(self) -> None:
        """No writer is left (a finished run): count records still incomplete at EOF as skipped."""
        for key, reader in self.readers.items():
            self.summary.add(reader.finish())
            self.summary.note_skipped(key, reader.skipped_count, reader.skipped)


def load_trace_dir(*roots: str | os.PathLike[str]) -> TraceSummary:
    """Read every log under the folders once, as for `kernel-lens trace DIR`."""
    directory = TraceDirectory(list(roots))
    directory.refresh()
    directory.finish()
    return directory.summary
