"""Structured-trace reader benchmark: index a ~200 MB TORCH_TRACE log made by repeating real records,
then time how fast appended bytes (1 MB) of a watched log are processed. Prints numbers; asserts nothing.

Usage: python benchmarks/trace_bench.py [--mb 200] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = [ROOT / "tests/fixtures/torch_trace/breaks_recompile_failure/dedicated_log_torch_trace_single.log",
             ROOT / "tests/fixtures/torch_trace/inductor_small/dedicated_log_torch_trace_single.log"]
FRAME_ID = re.compile(rb'"frame_id": (\d+)')


def _renumbering_template() -> tuple[list[bytes], list[int]]:
    """The real records split around their frame ids, so each repetition can be a new set of frames."""
    data = b"".join(t.read_bytes().rstrip(b"\n") + b"\n" for t in TEMPLATES)
    pieces, ids, last = [], [], 0
    for m in FRAME_ID.finditer(data):
        pieces.append(data[last:m.start(1)])
        ids.append(int(m.group(1)))
        last = m.end(1)
    pieces.append(data[last:])
    return pieces, ids


def _repetition(pieces: list[bytes], ids: list[int], base: int) -> bytes:
    out = [pieces[0]]
    for frame_id, piece in zip(ids, pieces[1:]):
        out.append(str(frame_id + base).encode())
        out.append(piece)
    return b"".join(out)


def write_trace(path: Path, megabytes: float, first_rep: int = 0) -> int:
    """Append repetitions of real records to `path` until it grew by `megabytes`; returns repetitions."""
    pieces, ids = _renumbering_template()
    target, written, rep = int(megabytes * (1 << 20)), 0, first_rep
    with path.open("ab") as f:
        while written < target:
            chunk = _repetition(pieces, ids, rep * 100)
            f.write(chunk)
            written += len(chunk)
            rep += 1
    return rep - first_rep


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / (1 << 20)


def index_in_this_process(trace_dir: Path) -> dict[str, float]:
    """Index the folder once (the child side of the benchmark); memory measured against this process."""
    from lsp_server.parsers.torch_trace.findings import trace_diagnostics
    from lsp_server.parsers.torch_trace.logs_dir import TraceDirectory

    baseline = _rss_mb()
    start, cpu_start = time.perf_counter(), time.process_time()
    directory = TraceDirectory([trace_dir])
    directory.refresh()
    directory.finish()
    indexed, indexed_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    summary = directory.summary
    start = time.perf_counter()
    functions, diagnostics = summary.functions(), trace_diagnostics(summary)
    findings = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    log = next(iter(summary.logs.values()))
    return {"index_s": indexed, "index_cpu_s": indexed_cpu, "findings_s": findings, "rss_baseline_mb": baseline, "rss_peak_mb": peak,
            "rss_after_mb": _rss_mb(), "records": log.record_count, "compiles": len(summary.compiles()),
            "functions": len(functions), "diagnostics": len(diagnostics), "skipped": summary.skipped_records}


def append_latency(trace_dir: Path, rounds: int = 5) -> list[tuple[float, float]]:
    """Per round: (MB appended, seconds for refresh() to take them in) on an already-indexed log."""
    from lsp_server.parsers.torch_trace.logs_dir import TraceDirectory

    log = next(trace_dir.glob("*.log"))
    directory = TraceDirectory([trace_dir])
    directory.refresh()
    results = []
    for i in range(rounds):
        before = log.stat().st_size
        write_trace(log, 1.0, first_rep=10_000 + i * 10)
        grown = (log.stat().st_size - before) / (1 << 20)
        start = time.perf_counter()
        directory.refresh()
        results.append((grown, time.perf_counter() - start))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mb", type=float, default=200)
    parser.add_argument("--keep", type=Path, help="write the trace here and keep it")
    parser.add_argument("--index-only", type=Path, help=argparse.SUPPRESS)  # child process mode
    args = parser.parse_args()
    if args.index_only:
        print(json.dumps(index_in_this_process(args.index_only)))
        return
    work = args.keep or Path(tempfile.mkdtemp(prefix="trace_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    log = work / "dedicated_log_torch_trace_bench.log"
    log.unlink(missing_ok=True)
    start = time.perf_counter()
    reps = write_trace(log, args.mb)
    size_mb = log.stat().st_size / (1 << 20)
    print(f"trace: {size_mb:.0f} MB ({reps} repetitions of real records) written in "
          f"{time.perf_counter() - start:.1f} s")
    # a fresh process, so the memory figure is the indexer's alone
    child = subprocess.run([sys.executable, __file__, "--index-only", str(work)], capture_output=True, text=True,
                           check=True, cwd=ROOT)
    r = json.loads(child.stdout.strip().splitlines()[-1])
    print(f"index: {r['index_s']:.2f} s wall, {r['index_cpu_s']:.2f} s CPU ({size_mb / r['index_s']:.0f} MB/s), "
          f"{r['records']} records, "
          f"{r['compiles']} frame compiles, {r['skipped']} skipped")
    print(f"findings (functions + diagnostics): {r['findings_s']:.2f} s, {r['functions']} functions, "
          f"{r['diagnostics']} diagnostics")
    print(f"memory: peak RSS {r['rss_peak_mb']:.0f} MB, baseline {r['rss_baseline_mb']:.0f} MB, "
          f"over baseline {r['rss_peak_mb'] - r['rss_baseline_mb']:.0f} MB (after: {r['rss_after_mb']:.0f} MB)")
    for grown, seconds in append_latency(work):
        print(f"append: {grown:.2f} MB to the watched log processed in {seconds * 1000:.0f} ms")
    if not args.keep:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
