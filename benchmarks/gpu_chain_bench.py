"""GPU-run figures for the language server (issue 47): indexing a real GPU run with its Triton cache entries,
and answering a compiled-chain link (`kernelLens.tritonChain`: a SASS/PTX/LLIR/TTGIR/TTIR line -> Triton line
-> FX nodes -> user line, with every stage's lines back). The committed H100 run
(tests/fixtures/inductor_gpu_train/transformer_train: 3 graphs, 72 kernels, 75 cache entries) is copied
--copies times into one program folder, so the index holds hundreds of kernels and cache entries.
Answers are in process (no JSON-RPC). Prints numbers; asserts nothing.

    .venv/bin/python benchmarks/gpu_chain_bench.py [--copies 6] [--asks 400]
"""
from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from lsp_server.features.gpu_kernels import chain_json
from lsp_server.features.lookup import uri_of
from lsp_server.index import Index
from lsp_server.loading import gpu_profile, triton_kernels
from lsp_server.loading.run_loader import load_run
from lsp_server.loading.triton_kernels import located_lines

PROGRAM = Path(__file__).resolve().parents[1] / "tests/fixtures/inductor_gpu_train/transformer_train"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def make_program(root: Path, copies: int) -> list[Path]:
    program = root / "transformer_train"
    shutil.copytree(PROGRAM, program)
    (run,) = program.glob("torch_compile_debug/run_*")
    runs = [run]
    for n in range(1, copies):
        copy = run.with_name(f"{run.name[:-4]}{n:02d}{run.name[-2:]}")
        shutil.copytree(run, copy)
        runs.append(copy)
    return runs


def index_runs(runs: list[Path]) -> tuple[Index, float]:
    gpu_profile.clear_caches()
    triton_kernels.clear_caches()
    start = time.perf_counter()
    index = Index()
    for run_dir in runs:
        index.put_run(load_run(run_dir))
    return index, time.perf_counter() - start


def chain_asks(index: Index, count: int, seed: int = 0) -> list[tuple[str, int]]:
    """(stage file uri, 0-based line) of located lines of every chained cache entry, sampled."""
    asks = []
    for view in index.views.values():
        for graph in view.run.graphs:
            for kernel in graph.kernels:
                chosen = kernel.gpu.chosen if kernel.gpu else None
                for stage in chosen.stages if chosen else ():
                    path = chosen.stage_path(stage)
                    asks += [(uri_of(str(path)), s.line - 1) for s in located_lines(path, stage)]
    random.Random(seed).shuffle(asks)
    return asks[:count]


def timed(index: Index, asks: list[tuple[str, int]]) -> list[float]:
    times = []
    for uri, line in asks:
        start = time.perf_counter()
        answer = chain_json(index, uri, line)
        times.append((time.perf_counter() - start) * 1000)
        assert "error" not in answer or "inlined" in answer["error"], answer
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--copies", type=int, default=6)
    parser.add_argument("--asks", type=int, default=400)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = make_program(Path(tmp), args.copies)
        index, seconds = index_runs(runs)
        kernels = sum(len(g.kernels) for v in index.views.values() for g in v.run.graphs)
        entries = sum(len(k.gpu.entries) for v in index.views.values() for g in v.run.graphs
                      for k in g.kernels if k.gpu)
        print(f"index: {len(runs)} runs, {kernels} kernels, {entries} Triton cache entries: {seconds * 1000:.0f} ms")
        asks = chain_asks(index, args.asks)
        triton_kernels.clear_caches()
        cold = timed(index, asks)  # the first ask of a stage file parses it
        warm = timed(index, asks)
        for name, values in (("chain link, first pass (stage files parsed on demand)", cold),
                             ("chain link, warm", warm)):
            print(f"{name}: n={len(values)} p50 {statistics.median(values):.2f} ms, "
                  f"p99 {percentile(values, 0.99):.2f} ms, max {max(values):.2f} ms")


if __name__ == "__main__":
    main()
