"""GPU kernels in the editor (issue 47): the kernel hover's compiled facts and autotuning, the compiled chain of
a Triton kernel (`kernelLens.tritonChain`: a PTX/SASS/TTIR/TTGIR/LLIR line or an output_code.py line ->
Triton line -> FX nodes -> the user's line, and back to every stage's lines), the Triton kernels a line of the
user's file or of a kernel's own file leads to (`kernelLens.tritonKernelsAt`: where the chain opens from), and
`kernelLens.benchmarkKernel` (the kernel's standalone module run on this machine's GPU as compiled and as
max-autotune compiles it, side by side, through `python -m lsp_server.loading.kernel_benchmark`; without a GPU, a
clear message and what was recorded beside output_code.py)."""
from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from lsp_server.features.failsafe import failsafe
from lsp_server.features.lookup import path_of, uri_of
from lsp_server.features.source_lines import file_lines
from lsp_server.index import Index, source_of
from lsp_server.model import Graph, Kernel, Run, normalize_path

# What the loader attached (`kernel.gpu`: loading.triton_kernels.KernelGpu) answers everything here: its
# methods read the stage files on first use, so this module imports no parser.
STAGES = ("ttir", "ttgir", "llir", "ptx", "sass")
TRITON_CACHE_FOLDER = "triton_cache"
KERNEL_BENCH_FILE = "benchmark_kernels.txt"
KERNEL_BENCHMARKS_FILE = "kernel_benchmarks.json"
BENCH_MODULE = "lsp_server.loading.kernel_benchmark"
SERVER_ROOT = Path(__file__).resolve().parents[2]  # where `lsp_server` imports from, for the benchmark process
VARIANT_LABELS = {"default": "as compiled", "max_autotune": "max-autotune", "env_max_autotune": "MAX_AUTOTUNE=1 only"}
CHAIN_COMMAND = "kernelLens.tritonChain"
KERNELS_AT_COMMAND = "kernelLens.tritonKernelsAt"
BENCHMARK_COMMAND = "kernelLens.benchmarkKernel"
NO_GPU = ("Benchmarking a kernel needs a CUDA GPU on this machine (none found: torch.cuda.is_available() is "
          "False or torch is not installed). Run `python output_code.py -k` on a GPU machine, or "
          "`kernel-lens profile-inductor` there, and open the results here.")
MAX_TRIED_SHOWN = 6
NOT_TUNED = ("kernel source", "launch grid", "only config")  # block sizes read elsewhere than autotuning records
BENCH_TIMEOUT_S = 600  # both variants: each compiles and benchmarks its configs in a process of its own


def first_argument(args: tuple[Any, ...]) -> dict[str, Any]:
    return args[0] if args and isinstance(args[0], dict) else {}


def kernel_for_entry(index: Index, folder: Path) -> tuple[Run, Graph, Kernel, Any] | None:
    for view in index.views.values():
        for graph in view.run.graphs:
            for kernel in graph.kernels:
                entry = kernel.gpu.entry_keyed(folder.name) if kernel.gpu else None
                if entry is not None:
                    return view.run, graph, kernel, entry
    return None


def chain_json(index: Index, uri: str, line0: int) -> dict[str, Any]:
    path = Path(path_of(uri))
    stage = path.name.rsplit(".", 1)[-1]
    if stage in STAGES and path.parent.parent.name == TRITON_CACHE_FOLDER:
        found = kernel_for_entry(index, path.parent)
        if found is None:
            return {"error": f"{path.parent.name}: no indexed kernel has this Triton cache entry"}
        run, graph, kernel, entry = found
        at, own = kernel.gpu.locate(entry, stage, line0 + 1)
        if at is None:
            return {"error": f"line {line0 + 1} of {path.name} has no location record"}
        if not own:
            return {"error": f"line {line0 + 1} is inlined Triton library code ({at.source_file}:{at.source_line}); "
                             f"{stage} records no call site in `{kernel.name}` for it"}
        return chain_from_triton_line(run, graph, kernel, entry, at.source_line, stage, line0)
    generated = index.generated_file(str(path))
    kernel = generated.kernel_at(line0 + 1) if generated else None
    if generated is None or kernel is None or kernel.language != "triton":
        return {"error": "not a line of a Triton kernel or of its Triton cache entry"}
    gpu = kernel.gpu
    offset = gpu.offset if gpu else None
    entry = gpu.chosen if gpu else None
    if offset is None or entry is None:
        return {"error": f"`{kernel.name}`: no Triton cache entry kept beside this run (or none known as launched)"}
    run = index.views[generated.graph.run_id].run
    return chain_from_triton_line(run, generated.graph, kernel, entry, line0 + 1 - offset, "triton", line0)


def chain_from_triton_line(run: Run, graph: Graph, kernel: Kernel, entry: Any, triton_line: int,
                           stage: str, line0: int) -> dict[str, Any]:
    offset = kernel.gpu.offset or 0
    code_line = offset + triton_line  # 1-based in output_code.py
    nodes = next((kl.nodes for kl in kernel.lines if kl.line == code_line), [])
    precision = "line" if nodes else "kernel"  # a line the index maps to no node: the kernel's nodes stand in
    source = source_of(graph, nodes or kernel.nodes) if nodes or kernel.nodes else None
    return {"kernel": kernel.name, "graph_id": graph.id, "run_id": run.id, "entry": entry.key, "stage": stage,
            "launch": launch_json(kernel),
            "line": line0, "triton": {"uri": uri_of(str(graph.path / "output_code.py")), "line": code_line - 1,
                                      "kernel_file_line": triton_line,
                                      "text": graph.output_code_lines[code_line - 1].strip()
                                      if 0 < code_line <= len(graph.output_code_lines) else ""},
            "nodes": nodes or kernel.nodes, "precision": precision,
            "source": {"uri": uri_of(source.file), "line": source.line - 1} if source else None,
            "stages": {stage: {"uri": uri_of(path), "lines": lines}
                       for stage, (path, lines) in kernel.gpu.stage_links(entry, triton_line).items()}}


def launch_json(kernel: Kernel) -> dict[str, Any]:
    """The launched config (each setting with where it is from) and the configs autotuning tried, fastest first."""
    gpu = kernel.gpu
    settings = [{"name": name, "value": value, "origin": origin}
                for name, (value, origin) in gpu.block_origins().items()]
    if gpu.chosen is not None:
        settings += [{"name": name, "value": str(value), "origin": "cache entry"}
                     for name, value in (("num_warps", gpu.chosen.num_warps), ("num_stages", gpu.chosen.num_stages))
                     if value is not None]
    return {"settings": settings, "chosen_by": gpu.chosen_by,
            "tried": [{"config": t.config, "ms": t.ms, "registers": t.registers, "spills": t.spills,
                       "chosen": chosen, "search": search} for search, t, chosen in tried_configs(gpu)]}


def tried_configs(gpu: Any) -> list[tuple[str, Any, bool]]:
    """(search, config, kept) of every config benchmarked: autotuning's, then coordinate descent's; fastest
    first in each. Of autotuning's, the best is kept only where coordinate descent did not go on from it."""
    found = []
    if gpu.autotune is not None:
        best = gpu.autotune.best.config if gpu.autotune.best else None
        found += [("autotune", t, t.config == best and gpu.coordesc is None)
                  for t in sorted(gpu.autotune.tried, key=lambda t: t.ms)]
    if gpu.coordesc is not None:
        found += [("coordinate descent", t, t.config == gpu.coordesc.best)
                  for t in sorted(gpu.coordesc.tried, key=lambda t: t.ms)]
    return found


def chained(kernel: Kernel) -> bool:
    """A Triton kernel whose launched cache entry is kept beside its run with its stages: its chain can be shown."""
    gpu = kernel.gpu
    return kernel.language == "triton" and gpu is not None and gpu.chosen is not None and gpu.offset is not None \
        and bool(gpu.chosen.stages)


def chain_start(run_id: str, graph: Graph, kernel: Kernel, line0: int) -> dict[str, Any]:
    """Where a kernel's chain opens: its output_code.py and the 0-based line there (a Triton line of the kernel)."""
    return {"kernel": kernel.name, "graph_id": graph.id, "run_id": run_id, "uri": uri_of(str(graph.output_code)),
            "line": line0, "ms": kernel.time_ms}


def kernel_of_file(index: Index, path: str) -> tuple[Graph, Kernel] | None:
    """The indexed Triton kernel whose own file (`# kernel path:` in output_code.py) is `path`."""
    target = normalize_path(path)
    for view in index.views.values():
        for graph in view.run.graphs:
            for kernel in graph.kernels:
                own = kernel.gpu.kernel_file if kernel.gpu is not None else None
                if own is not None and normalize_path(own) == target:
                    return graph, kernel
    return None


def def_line(graph: Graph, kernel: Kernel) -> int:
    """1-based output_code.py line of the kernel's `def` (its opening line where none is found)."""
    opening = f"def {kernel.name}("
    lines = graph.output_code_lines
    return next((n + 1 for n in range(kernel.gpu.offset, min(kernel.end_line, len(lines)))
                 if lines[n].startswith(opening)), kernel.gpu.offset + 1)


def compiled_line(kernel: Kernel, lines: list[int]) -> int:
    """Of a kernel's output_code.py lines (1-based, ascending), the first that every stage kept has instructions
    from (a constant, `tmp1 = tl.full([1], 0.5, ...)`, compiles to none), else the first with some, else the first."""
    counts = [sum(bool(stage_lines) for _, stage_lines in
                  kernel.gpu.stage_links(kernel.gpu.chosen, n - kernel.gpu.offset).values()) for n in lines]
    full = len(kernel.gpu.chosen.stages)
    return next((n for n, c in zip(lines, counts) if c == full and full), None) or \
        next((n for n, c in zip(lines, counts) if c), lines[0])


def kernels_at_json(server: Any, index: Index, uri: str, line0: int) -> dict[str, Any]:
    """The Triton kernels with a kept cache entry that a line leads to, most costly first: on a user's line, those
    computing it (each at its first Triton line from it); on a kernel's own file or output_code.py, that kernel."""
    path = path_of(uri)
    generated = index.generated_file(path)
    if generated is not None:
        kernel = generated.kernel_at(line0 + 1)
        if kernel is None or not chained(kernel):
            return {"error": "not a line of a Triton kernel whose compiled stages are kept beside its run"}
        return {"kernels": [chain_start(generated.graph.run_id, generated.graph, kernel, line0)]}
    own = kernel_of_file(index, path)
    if own is not None:
        graph, kernel = own
        if not chained(kernel):
            return {"error": f"`{kernel.name}`: no compiled stage kept beside its run (or no entry known as launched)"}
        return {"kernels": [chain_start(graph.run_id, graph, kernel, kernel.gpu.offset + line0)]}
    lines = file_lines(server, index, uri)
    hits = lines.hits(line0 + 1) if lines is not None else []
    found = []
    for hit in hits:
        kernel, graph = hit.ref.kernel, hit.ref.graph
        if not chained(kernel):
            continue
        body = [n for n in hit.generated_lines if kernel.gpu.offset < n <= kernel.end_line]
        # no Triton line of the kernel from this line (its nodes are only on the launch): the kernel's `def`
        line = compiled_line(kernel, body) if body else def_line(graph, kernel)
        found.append(chain_start(hit.ref.run.id, graph, kernel, line - 1))
    if not found:
        return {"error": "no Triton kernel whose compiled stages are kept beside its run computes this line"
                         if hits or lines is not None else "not a line of an indexed run's file or Triton kernel"}
    return {"kernels": sorted(found, key=lambda k: (-(k["ms"] or 0.0), k["graph_id"], k["kernel"]))}


def _bytes(value: int | None) -> str:
    return "?" if value is None else f"{value} B"


def gpu_hover_block(kernel: Kernel) -> str | None:
    """Registers, spills, shared memory, warps, stages, block sizes of the launched config; autotuning."""
    gpu = kernel.gpu
    if gpu is None:
        return None
    parts = []
    chosen = gpu.chosen
    logged = gpu.coordesc.best_timing if gpu.coordesc else gpu.autotune.best if gpu.autotune else None
    blocks = " · ".join(f"{k}={v}" + (f" ({origin})" if origin in NOT_TUNED else "")
                        for k, (v, origin) in gpu.block_origins().items())
    if chosen is not None:
        usage = chosen.usage
        spills = f"{logged.spills} spilled" if logged and logged.spills is not None else \
            f"stack {_bytes(usage.stack if usage else None)}"
        entry = f"[`{chosen.key[:12]}`]({uri_of(str(chosen.folder / (chosen.name + '.json')))})"
        parts.append(f"**Triton** (cache entry {entry}, {gpu.chosen_by}; {len(gpu.entries)} compiled): "
                     f"{usage.registers if usage and usage.registers is not None else '?'} registers · {spills} · "
                     f"shared {_bytes(chosen.shared)} · num_warps={chosen.num_warps} · num_stages={chosen.num_stages}"
                     + (f" · {blocks}" if blocks else "")
                     + f"\n\nStages: {', '.join(chosen.stages) or 'metadata only'} (`{CHAIN_COMMAND}`)")
    elif gpu.entries:
        parts.append(f"**Triton**: {len(gpu.entries)} compiled configs in the cache; which one launched is unknown"
                     + (f" · launched with {blocks}" if blocks else ""))
    elif blocks:
        parts.append(f"**Triton**: launched with {blocks}")
    for search, title in (("autotune", "Autotuning"), ("coordinate descent", "Coordinate descent")):
        tried = [(t, kept) for s, t, kept in tried_configs(gpu) if s == search]
        rows = [f"- `{t.config}`: {t.ms:.4f} ms, {t.registers} registers, {t.spills} spilled"
                + (" **← chosen**" if kept else "") for t, kept in tried[:MAX_TRIED_SHOWN]]
        if rows:
            parts.append(f"**{title}**: {len(tried)} configs benchmarked\n" + "\n".join(rows))
    if gpu.best_config is not None:
        how = "coordinate descent" if gpu.best_config.get("found_by_coordesc") else "autotuning"
        parts.append(f"**Chosen** by {how} in {gpu.best_config.get('time_taken_ms')} ms (.best_config)")
    if gpu.bench is not None:
        b = gpu.bench
        parts.append(f"**Benchmark** (`output_code.py -k`, line {b.line} of benchmark_kernels.txt): {b.ms:.3f} ms · "
                     f"{b.gb:.3f} GB · {b.gb_per_s:.2f} GB/s")
    if gpu.benchmarks is not None:
        parts.append(f"**Benchmark, standalone module** ({KERNEL_BENCHMARKS_FILE}, {gpu.benchmarks.device or '?'}): "
                     + " | ".join(variant_text(v) for v in gpu.benchmarks.variants))
    for table in gpu.gemm:
        rows = [f"- `{c.name}` {c.ms:.4f} ms ({c.percent:.1f}%)" + (f" {c.description}" if c.description else "")
                + (" **← chosen**" if i == 0 else "") for i, c in enumerate(table.choices[:MAX_TRIED_SHOWN])]
        parts.append(f"**Max-autotune** `{table.op}({table.sizes})`: {len(table.choices)} choices shown by "
                     f"Inductor, chosen `{table.chosen.name if table.chosen else '?'}`\n" + "\n".join(rows))
    return "\n\n".join(parts) or None


def variant_text(v: Any) -> str:
    """`max-autotune 0.005 ms · 789.59 GB/s (6 configs)` for one timed variant."""
    label = VARIANT_LABELS.get(v.variant, v.variant)
    if v.ms is None:
        return f"{label}: failed ({v.error or 'no timing'})"
    tried = f" ({v.configs_tried} configs)" if v.configs_tried else ""
    return f"{label} {v.ms:.3f} ms · {v.gb_per_s:.2f} GB/s{tried}"


def variants_json(benchmarks: Any) -> list[dict[str, Any]]:
    return [{"variant": v.variant, "ms": v.ms, "gb": v.gb, "gb_per_s": v.gb_per_s, "configs_tried": v.configs_tried,
             "best_config": v.best_config, "error": v.error} for v in benchmarks.variants] if benchmarks else []


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def bench_json(kernel: Kernel, bench: Any, **extra: Any) -> dict[str, Any]:
    answer: dict[str, Any] = {"kernel": kernel.name, **extra}
    if bench is not None:
        answer.update(ms=bench.ms, gb=bench.gb, gb_per_s=bench.gb_per_s, registers=bench.registers,
                      spills=bench.spills, shared=bench.shared)
    return answer


async def benchmark_kernel_json(index: Index, uri: str, line0: int, max_autotune: bool = True) -> dict[str, Any]:
    """On a GPU machine: the kernel's standalone module as compiled and (unless `max_autotune` is False) as
    max-autotune compiles it, each timed in its own process, recorded beside output_code.py. Without a GPU: a
    clear message, and what was recorded there (the standalone variants, the `-k` line)."""
    generated = index.generated_file(path_of(uri))
    kernel = generated.kernel_at(line0 + 1) if generated else None
    if generated is None or kernel is None or kernel.language != "triton":
        return {"error": "not a line of a Triton kernel in an output_code.py"}
    recorded = kernel.gpu.bench if kernel.gpu else None
    timed = kernel.gpu.benchmarks if kernel.gpu else None
    if not cuda_available():
        message = NO_GPU + (f" Recorded earlier ({KERNEL_BENCH_FILE}): {recorded.ms:.3f} ms, "
                            f"{recorded.gb_per_s:.2f} GB/s." if recorded else "") + \
            (f" Standalone module on {timed.device or '?'} ({KERNEL_BENCHMARKS_FILE}): "
             + " | ".join(variant_text(v) for v in timed.variants) + "." if timed else "")
        return bench_json(kernel, recorded, error=message, recorded=recorded is not None or timed is not None,
                          **({"device": timed.device, "variants": variants_json(timed)} if timed else {}))
    variants = "default,max_autotune" if max_autotune else "default"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", BENCH_MODULE, str(generated.graph.output_code), kernel.name, "--variants", variants,
        "--record", cwd=generated.graph.path, env={**os.environ, "PYTHONPATH": str(SERVER_ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(process.communicate(), BENCH_TIMEOUT_S)
    except asyncio.TimeoutError:
        process.kill()
        return {"error": f"benchmarking `{kernel.name}` ran past {BENCH_TIMEOUT_S} s", "kernel": kernel.name}
    try:
        answer = json.loads(out.decode(errors="replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": f"the benchmark of `{kernel.name}` printed no result: "
                         + err.decode(errors="replace")[-400:], "kernel": kernel.name}
    if "error" in answer:
        return {"error": answer["error"], "kernel": kernel.name}
    default = next((v for v in answer["variants"] if v["variant"] == "default"), {})
    return {"kernel": kernel.name, "ms": default.get("ms"), "gb": default.get("gb"), "gb_per_s": default.get("gb_per_s"),
            "device": answer.get("device"), "variants": answer["variants"], "recorded": False}


def register(server: Any) -> None:
    @server.command(CHAIN_COMMAND)
    @failsafe(server, CHAIN_COMMAND)
    def triton_chain(*args: Any) -> dict[str, Any]:
        """{uri, line (0-based)}: a stage file's line or an output_code.py line of a Triton kernel."""
        request = first_argument(args)
        if not isinstance(request.get("uri"), str) or not isinstance(request.get("line"), int):
            return {"error": "tritonChain expects {\"uri\": str, \"line\": int}"}
        return chain_json(server.index, request["uri"], request["line"])

    @server.command(KERNELS_AT_COMMAND)
    @failsafe(server, KERNELS_AT_COMMAND)
    def triton_kernels_at(*args: Any) -> dict[str, Any]:
        """{uri, line (0-based)}: a user's line, a Triton kernel's own file or output_code.py -> where chains open."""
        request = first_argument(args)
        if not isinstance(request.get("uri"), str) or not isinstance(request.get("line"), int):
            return {"error": "tritonKernelsAt expects {\"uri\": str, \"line\": int}"}
        return kernels_at_json(server, server.index, request["uri"], request["line"])

    @server.command(BENCHMARK_COMMAND)
    @failsafe(server, BENCHMARK_COMMAND)
    async def benchmark_kernel(*args: Any) -> dict[str, Any]:
        """{uri, line, maxAutotune?}: a Triton kernel's line in output_code.py -> its standalone module's time,
        bytes and bandwidth, as compiled and (unless maxAutotune is false) as max-autotune compiles it."""
        request = first_argument(args)
        if not isinstance(request.get("uri"), str) or not isinstance(request.get("line"), int) \
                or not isinstance(request.get("maxAutotune", True), bool):
            return {"error": "benchmarkKernel expects {\"uri\": str, \"line\": int, \"maxAutotune\"?: bool}"}
        return await benchmark_kernel_json(server.index, request["uri"], request["line"],
                                           request.get("maxAutotune", True))
