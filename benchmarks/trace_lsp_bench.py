"""Structured-trace figures for the language server: appending 1 MB to a watched TORCH_TRACE log of 8 MB (the
last appended records hold a graph break) → the graph-break diagnostic published; and the reader's incremental
read of that 1 MB vs a full re-read of the grown log. Prints numbers; asserts nothing.

    .venv/bin/python benchmarks/trace_lsp_bench.py [--mb 1] [--initial-mb 8] [--repeat 5]
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from lsp_server.parsers.torch_trace.logs_dir import TraceDirectory

LOG = Path(__file__).resolve().parents[1] / "tests/fixtures/torch_trace/breaks_recompile_failure" \
    / "dedicated_log_torch_trace_single.log"
BREAK_RECORD = b'"dynamo_graph_break_reason"'


def split_log(data: bytes) -> tuple[bytes, bytes, bytes]:
    """(records before the first graph break, filler records to repeat, the rest from the graph break on)."""
    starts = [0] + [i + 1 for i in range(len(data) - 1) if data[i] == 10 and data[i + 1] != 9]
    cut = next(s for s in starts if data[s:data.find(b"\n", s)].find(BREAK_RECORD) >= 0)
    filler = b"".join(data[a:b] for a, b in zip(starts, starts[1:] + [len(data)])
                      if b'"chromium_event"' in data[a:data.find(b"\n", a)] and a < cut)
    return data[:cut], filler, data[cut:]


def append_block(filler: bytes, rest: bytes, mb: float) -> bytes:
    size = int(mb * (1 << 20))
    repeats = max(1, (size - len(rest)) // max(len(filler), 1))
    return filler * repeats + rest


async def start_client(workspace: Path) -> tuple[LanguageClient, list]:
    client = LanguageClient("trace-bench", "1")
    received: list[tuple[float, types.PublishDiagnosticsParams]] = []

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        received.append((time.perf_counter(), params))

    for method in (types.WINDOW_LOG_MESSAGE, types.WINDOW_SHOW_MESSAGE):
        client.feature(method)(lambda params: None)
    await client.start_io(sys.executable, "-m", "lsp_server")
    await client.initialize_async(types.InitializeParams(
        capabilities=types.ClientCapabilities(), root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(workspace.as_uri(), "bench")]))
    client.initialized(types.InitializedParams())
    return client, received


def has_graph_break(received: list, since: int) -> float | None:
    for at, params in received[since:]:
        if any(d.code == "graph-break" for d in params.diagnostics):
            return at
    return None


async def one_append(folder: Path, head: bytes, block: bytes) -> float:
    workspace = folder / "ws"
    (workspace / "torch_trace").mkdir(parents=True)
    log = workspace / "torch_trace" / "dedicated_log_torch_trace_bench.log"
    log.write_bytes(head)
    client, received = await start_client(workspace)
    try:
        await asyncio.sleep(1.0)  # the head is indexed; the watcher is idle
        seen = len(received)
        started = time.perf_counter()
        with log.open("ab") as f:
            f.write(block)
        while (at := has_graph_break(received, seen)) is None:
            if time.perf_counter() - started > 60:
                raise TimeoutError("no graph-break diagnostic within 60 s")
            await asyncio.sleep(0.002)
        return at - started
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()


def reader_figures(folder: Path, head: bytes, block: bytes) -> tuple[float, float]:
    """(ms to read the appended block incrementally, ms to read the whole grown log from scratch)."""
    log = folder / "reader.log"
    log.write_bytes(head)
    live = TraceDirectory([log])
    live.refresh()
    with log.open("ab") as f:
        f.write(block)
    started = time.perf_counter()
    live.refresh_log(log)
    incremental = time.perf_counter() - started
    started = time.perf_counter()
    TraceDirectory([log]).refresh()
    return incremental * 1000, (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=1.0)
    parser.add_argument("--initial-mb", type=float, default=8.0, help="size of the log before the append")
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    head, filler, rest = split_log(LOG.read_bytes())
    head += filler * max(0, int(options.initial_mb * (1 << 20)) // max(len(filler), 1))
    block = append_block(filler, rest, options.mb)
    with tempfile.TemporaryDirectory() as folder:
        incremental, full = zip(*(reader_figures(Path(folder), head, block) for _ in range(options.repeat)))
        print(f"reader: append of {len(block) / (1 << 20):.2f} MB to a {len(head) / (1 << 20):.1f} MB log: incremental read "
              f"median {statistics.median(incremental):.1f} ms; full re-read of the grown log median "
              f"{statistics.median(full):.1f} ms")
        latencies = []
        for i in range(options.repeat):
            latencies.append(asyncio.run(one_append(Path(folder) / f"rep{i}", head, block)))
        print(f"server: append {len(block) / (1 << 20):.2f} MB to a watched log → graph-break diagnostic published: "
              f"median {statistics.median(latencies) * 1000:.0f} ms, min {min(latencies) * 1000:.0f} ms, "
              f"max {max(latencies) * 1000:.0f} ms ({options.repeat} runs, debounce 50 ms)")


if __name__ == "__main__":
    main()
