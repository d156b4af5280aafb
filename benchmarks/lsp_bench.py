"""Language-server figures: index time for ≥1,000 kernels, hover and highlight (kernelLens.linkedLines) latency
p50/p99, why-records of a 100-graph run indexed, time from a run landing on disk to hover/diagnostics and to its
why-diagnostics, server RSS with 100 runs, and the cost of finding nested debug folders in a 50,000-file workspace
(walk time; a nested run made after start → hover). Prints numbers; asserts nothing.

    .venv/bin/python benchmarks/lsp_bench.py [--kernels 1000] [--runs 100] [--files 50000] [--only server]
                                             [--profile server.prof]

--profile runs the server under cProfile (its request paths: `pstats` the file; timings are then cProfile's).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from lsp_server.index import Index
from lsp_server.loading.discovery import discover
from lsp_server.loading.run_loader import load_run

NODES_PER_KERNEL = 3
PROFILE_TO: list[str] = []  # --profile: the servers run under cProfile, writing here


def write_source(path: Path, graphs: int, kernels_per_graph: int) -> None:
    lines = ["import torch", ""]
    for g in range(graphs):
        lines.append(f"def fn_{g}(x):")
        lines += [f"    x = torch.neg(x) + {g * kernels_per_graph + k}" for k in range(kernels_per_graph * NODES_PER_KERNEL)]
        lines += ["    return x", ""]
    path.write_text("\n".join(lines) + "\n")


def def_line(graph: int, kernels_per_graph: int) -> int:
    """1-based line of `def fn_<graph>` in the generated source."""
    return 3 + graph * (kernels_per_graph * NODES_PER_KERNEL + 3)


def write_run(debug_dir: Path, name: str, source: Path, graphs: int, kernels_per_graph: int, tag: str = "",
              compile_error: bool = False, why: bool = False) -> Path:
    """A run folder in our contract's format, written to a temp name then renamed (atomic, as ours are)."""
    staging = debug_dir / f".{name}.tmp"
    for g in range(graphs):
        folder = staging / "lens" / f"graph_{g}"
        folder.mkdir(parents=True)
        readable, nodes, code, kernels = ["class Repro(torch.nn.Module):", "    def forward(self, arg0_1):"], [], [], []
        first_source = def_line(g, kernels_per_graph) + 1
        for k in range(kernels_per_graph):
            names = [f"neg_{k}_{n}" for n in range(NODES_PER_KERNEL)]
            for n, node in enumerate(names):
                src_line = first_source + k * NODES_PER_KERNEL + n
                text = f"x = torch.neg(x) + {g * kernels_per_graph + k * NODES_PER_KERNEL + n}"  # the line's text
                readable.append(f"        # File: {source}:{src_line} in fn_{g}, code: {text}")
                readable.append(f'        {node}: "f32[8]" = torch.ops.aten.neg.default(arg0_1)')
                readable.append("")
                nodes.append({"name": node, "target": "aten.neg.default", "readable_line": len(readable) - 1,
                              "source": {"file": str(source), "line": src_line, "function": f"fn_{g}",
                                         "code": text}})
            kernel_name = f"cpp_fused_neg{tag}_{g}_{k}"
            start = len(code) + 1
            code.append(f"{kernel_name} = load_kernel('{kernel_name}', r'''")
            code += ["extern \"C\" void kernel(const float* in_ptr0, float* out_ptr0)", "{",
                     "    for (int64_t x0 = 0; x0 < 8; x0 += 1)", "    {"]
            lines = []
            for node in names:
                fx_line = next(n["readable_line"] for n in nodes if n["name"] == node)
                code.append(f"        // Corresponding FX code line: {fx_line}")
                code.append(f"        auto {node} = -in_ptr0[x0];")
                lines.append({"output_code_line": len(code), "nodes": [node]})
            code += ["        out_ptr0[x0] = 0;", "    }", "}", "''')", ""]
            kernels.append({"name": kernel_name, "kind": "pointwise", "output_code_lines": [start, len(code) - 1],
                            "nodes": names, "lines": lines})
        (folder / "fx_graph_readable.py").write_text("\n".join(readable) + "\n")
        (folder / "output_code.py").write_text("\n".join(code) + "\n")
        (folder / "kernel_map.json").write_text(json.dumps(
            {"version": 1, "graph_id": f"graph_{g}", "status": "compile_error" if compile_error else "ok",
             "nodes": nodes, "kernels": kernels}))
        if why:  # a refused fusion on each kernel's first node and a scalar loop on its last (why.json)
            (folder / "why.json").write_text(json.dumps({"version": 1, "graph_id": f"graph_{g}", "records": [
                record for k in kernels for record in (
                    {"kind": "not_fused", "nodes": [k["nodes"][0]], "kernel": k["name"], "reason": "max_fusion_size",
                     "message": f"did not join the kernel before: bench {tag}", "related": [],
                     "fix": {"title": "Set compiler.config.max_fusion_size = 128", "setting": "max_fusion_size",
                             "value": 128}},
                    {"kind": "not_vectorized", "nodes": [k["nodes"][-1]], "kernel": k["name"],
                     "reason": "no_simd_reduction", "message": "the max loop runs scalar", "fix": None})]}))
        if compile_error:
            (folder / "compile_error.json").write_text(json.dumps(
                {"version": 1, "graph_id": f"graph_{g}", "command": "g++", "diagnostics": [
                    {"severity": "error", "message": f"bench error {tag}", "cpp_file": "x.cpp", "cpp_line": 3,
                     "column": 1, "output_code_line": 8, "kernel": kernels[0]["name"], "nodes": [],
                     "source": {"file": str(source), "line": first_source, "function": f"fn_{g}", "code": ""}}]}))
    target = debug_dir / name
    os.replace(staging, target)
    return target


def run_name(i: int) -> str:
    return f"run_2026_01_01_00_{i // 60:02d}_{i % 60:02d}_000000-pid_{i}"


def bench_index(folder: Path, kernels: int) -> None:
    graphs = max(kernels // 50, 1)
    source = folder / "big.py"
    write_source(source, graphs, 50)
    debug = folder / "torch_compile_debug"
    debug.mkdir()
    run_dir = write_run(debug, run_name(0), source, graphs, 50)
    times, index = _time_indexing(run_dir)
    count = sum(len(g.kernels) for g in index.runs_newest_first()[0].graphs)
    print(f"index: {count} kernels in {graphs} graphs: median {statistics.median(times) * 1000:.0f} ms, "
          f"best {min(times) * 1000:.0f} ms (load_run + Index.put_run)")


def _time_indexing(run_dir: Path, repeats: int = 5) -> tuple[list[float], Index]:
    """Seconds of load_run + Index.put_run of one run folder, `repeats` times; the last index built."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        index = Index()
        index.put_run(load_run(run_dir))
        times.append(time.perf_counter() - started)
    return times, index


def bench_why_index(folder: Path, graphs: int = 100) -> None:
    """A 100-graph run whose every kernel has two why-records: load + index it, and the same run without them."""
    source = folder / "why.py"
    write_source(source, graphs, 10)
    debug = folder / "why_debug"
    debug.mkdir()
    with_why = write_run(debug, run_name(0), source, graphs, 10, why=True)
    plain = write_run(debug, run_name(1), source, graphs, 10)
    for label, run_dir in (("with why.json", with_why), ("without", plain)):
        times, index = _time_indexing(run_dir)
        records = sum(len(g.why) for g in index.runs_newest_first()[0].graphs)
        print(f"index {graphs} graphs ({graphs * 10} kernels) {label}: {records} why-records, median "
              f"{statistics.median(times) * 1000:.0f} ms, best {min(times) * 1000:.0f} ms (load_run + Index.put_run)")


def percentiles(label: str, values: list[float]) -> None:
    values.sort()
    print(f"{label}: p50 {values[len(values) // 2] * 1000:.2f} ms, p99 {values[int(len(values) * 0.99)] * 1000:.2f} "
          f"ms ({len(values)} requests, real server)")


async def bench_highlight(client: LanguageClient, workspace: Path, source: Path) -> None:
    """The kernel view's request (kernelLens.linkedLines), from the source file and from an output_code.py."""
    code = next((workspace / "torch_compile_debug").glob("run_*/lens/graph_0/output_code.py"))
    for label, uri in (("source file", source.as_uri()), ("output_code.py", code.as_uri())):
        values = []
        for _ in range(200):
            started = time.perf_counter()
            linked = await client.workspace_execute_command_async(types.ExecuteCommandParams(
                command="kernelLens.linkedLines", arguments=[{"uri": uri}]))
            values.append(time.perf_counter() - started)
            assert linked and linked["links"]
        percentiles(f"highlight (kernelLens.linkedLines) from the {label}", values)


WAIT_S = 30.0  # a new run not seen within this is reported as missed (the bench goes on)


async def first_diagnostic(received: list, text: str) -> float | None:
    """When the first publishDiagnostics holding `text` arrived, waiting up to WAIT_S for it."""
    deadline = time.perf_counter() + WAIT_S
    while time.perf_counter() < deadline:
        times = [t for t, p in received if any(text in d.message for d in p.diagnostics)]
        if times:
            return min(times)
        await asyncio.sleep(0.002)
    return None


def report_delays(label: str, delays: list[float], missed: int) -> None:
    text = (f"median {statistics.median(delays) * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms ({len(delays)} runs)"
            if delays else "none seen")
    print(f"{label}: {text}" + (f"; {missed} not within {WAIT_S:.0f} s" if missed else "") + " (watcher debounce 50 ms)")


async def start_client(workspace: Path) -> tuple[LanguageClient, list]:
    client = LanguageClient("lsp-bench", "1")
    received: list[tuple[float, types.PublishDiagnosticsParams]] = []

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        received.append((time.perf_counter(), params))

    for method in (types.WINDOW_LOG_MESSAGE, types.WINDOW_SHOW_MESSAGE):
        client.feature(method)(lambda params: None)
    profile = ["-m", "cProfile", "-o", PROFILE_TO[0]] if PROFILE_TO else []
    await client.start_io(sys.executable, *profile, "-m", "lsp_server")
    await client.initialize_async(types.InitializeParams(
        capabilities=types.ClientCapabilities(), root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(workspace.as_uri(), "bench")]))
    client.initialized(types.InitializedParams())
    return client, received


async def hover(client: LanguageClient, source: Path, line0: int) -> str | None:
    result = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(source.as_uri()), types.Position(line0, 4)))
    return None if result is None else result.contents.value


async def bench_server(folder: Path, kernels: int) -> None:
    workspace = folder / "ws"
    workspace.mkdir()
    graphs = max(kernels // 50, 1)
    source = workspace / "big.py"
    write_source(source, graphs, 50)
    (workspace / "torch_compile_debug").mkdir()
    write_run(workspace / "torch_compile_debug", run_name(0), source, graphs, 50)
    client, received = await start_client(workspace)
    try:
        await client.workspace_execute_command_async(types.ExecuteCommandParams(command="kernelLens.listRuns"))
        latencies = {"def": [], "line": []}
        for i in range(400):
            g = i % graphs
            line0 = def_line(g, 50) - 1 if i % 2 == 0 else def_line(g, 50) + (i % 150)
            started = time.perf_counter()
            text = await hover(client, source, line0)
            latencies["def" if i % 2 == 0 else "line"].append(time.perf_counter() - started)
            assert text is not None
        for kind, values in latencies.items():
            percentiles(f"hover on {kind}", values)
        await bench_highlight(client, workspace, source)

        to_why, missed = [], 0
        for i in range(1, 11):  # first: the issue-33 target (new run → why-diagnostics < 500 ms)
            tag = f"why{i}"
            received.clear()
            started = time.perf_counter()
            write_run(workspace / "torch_compile_debug", run_name(i), source, 1, 5, tag=tag, why=True)
            seen = await first_diagnostic(received, f"bench {tag}")
            missed += seen is None
            if seen is not None:
                to_why.append(seen - started)
        report_delays("new run with why.json on disk → its why-diagnostics published", to_why, missed)
        to_hover, to_diagnostics, missed = [], [], 0
        for i in range(11, 21):
            tag = f"new{i}"
            received.clear()
            started = time.perf_counter()
            write_run(workspace / "torch_compile_debug", run_name(i), source, 1, 5, tag=tag, compile_error=True)
            deadline = started + WAIT_S
            while tag not in (await hover(client, source, def_line(0, 50) - 1) or "") and time.perf_counter() < deadline:
                await asyncio.sleep(0.002)
            if time.perf_counter() < deadline:
                to_hover.append(time.perf_counter() - started)
            seen = await first_diagnostic(received, f"bench error {tag}")
            missed += seen is None
            if seen is not None:
                to_diagnostics.append(seen - started)
        report_delays("new run on disk → hover shows it", to_hover, 10 - len(to_hover))
        report_delays("new run on disk → publishDiagnostics", to_diagnostics, missed)
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def bench_memory(folder: Path, runs: int) -> None:
    workspace = folder / "mem"
    workspace.mkdir()
    source = workspace / "model.py"
    write_source(source, 4, 10)
    (workspace / "torch_compile_debug").mkdir()
    for i in range(runs):
        write_run(workspace / "torch_compile_debug", run_name(i), source, 4, 10, tag=f"r{i}")
    client, _ = await start_client(workspace)
    try:
        listed = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="kernelLens.listRuns"))
        kernels = sum(r["kernels"] for r in listed)
        print(f"server RSS with {len(listed)} runs ({kernels} kernels): {rss_mb(client._server.pid):.0f} MB")
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()


def write_workspace_tree(root: Path, files: int) -> None:
    """A workspace of `files` empty files, 10 a folder: half the user's code, the rest in a .venv (with
    pyvenv.cfg), node_modules and .git — the trees discovery skips."""
    shares = {"src": 0.5, ".venv/lib/python3.11/site-packages": 0.2, "web/node_modules": 0.2, ".git/objects": 0.1}
    for top, share in shares.items():
        for i in range(int(files * share)):
            folder = root / top / f"p{i // 1000}" / f"m{(i // 10) % 100}"
            if i % 10 == 0:
                folder.mkdir(parents=True, exist_ok=True)
            (folder / f"f{i}.py").write_text("")
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")


async def bench_discovery(folder: Path, files: int) -> None:
    workspace = folder / "big_ws"
    write_workspace_tree(workspace, files)
    source = workspace / "src" / "p3" / "m7" / "model.py"
    write_source(source, 1, 5)
    (source.parent / "torch_compile_debug").mkdir()
    write_run(source.parent / "torch_compile_debug", run_name(0), source, 1, 5)
    times = []
    for _ in range(7):
        started = time.perf_counter()
        found = discover(workspace)
        times.append(time.perf_counter() - started)
    print(f"discovery: {files} files ({found.listed} folders listed, skipped trees not entered): median "
          f"{statistics.median(times) * 1000:.1f} ms, best {min(times) * 1000:.1f} ms; found {len(found.debug_dirs)}")
    started = time.perf_counter()
    client, _ = await start_client(workspace)
    try:
        while await hover(client, source, def_line(0, 5) - 1) is None:
            await asyncio.sleep(0.002)
        print(f"server start on that workspace → hover shows its nested run: {(time.perf_counter() - started) * 1000:.0f} ms")
        delays = []
        for i in range(1, 6):
            project = workspace / "src" / f"p{i}" / "m1" / "exp"
            project.mkdir()
            fresh = project / "model.py"
            write_source(fresh, 1, 5)
            staging = project / ".torch_compile_debug"
            staging.mkdir()
            write_run(staging, run_name(i), fresh, 1, 5)
            started = time.perf_counter()
            os.replace(staging, project / "torch_compile_debug")
            while await hover(client, fresh, def_line(0, 5) - 1) is None:
                await asyncio.sleep(0.002)
            delays.append(time.perf_counter() - started)
        print(f"new torch_compile_debug/ 4 levels down → hover shows it: median "
              f"{statistics.median(delays) * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms (5 folders)")
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--files", type=int, default=50_000, help="files in the discovery benchmark's workspace")
    parser.add_argument("--only", choices=("index", "server", "memory", "discovery"), help="one part of the bench")
    parser.add_argument("--profile", metavar="FILE", help="run the language servers under cProfile, into FILE")
    options = parser.parse_args()
    if options.profile:
        PROFILE_TO.append(str(Path(options.profile).absolute()))
    parts = {"index": lambda folder: (bench_index(folder, options.kernels), bench_why_index(folder)),
             "server": lambda folder: asyncio.run(bench_server(folder, options.kernels)),
             "memory": lambda folder: asyncio.run(bench_memory(folder, options.runs)),
             "discovery": lambda folder: asyncio.run(bench_discovery(folder, options.files))}
    with tempfile.TemporaryDirectory() as folder:
        for name, part in parts.items():
            if options.only in (None, name):
                part(Path(folder))


if __name__ == "__main__":
    main()
