"""Issue 47 on the committed H100 max-autotune run (tests/fixtures/inductor_gpu_train/autotune_gemm, regenerated
in session 12 with a profiler loop): a kernel whose launched config coordinate descent kept — Inductor's
`.best_config` then records no triton_cache_hash — is linked to its Triton cache entry (the hover links the
entry, the chain opens on it, the configs the search benchmarked are listed), checked against what the user's
profiler trace saw launched; and a looped reduction given one config (no autotuning) shows the R0_BLOCK it was
launched with, from TORCH_TRACE's `triton_kernel_info` (the older H100 fixture, inductor_gpu/mlp_train)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import FIXTURES, GPU_FIXTURES, SERVER, gpu_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from trace_workspaces import line_of

TRAIN = FIXTURES / "inductor_gpu_train"
TIMING = re.compile(r"COORDESC: (?P<config>.*?): (?P<ms>[0-9.]+), nreg (?P<nreg>\d+), nspill (?P<nspill>\d+), "
                    r"#shared-mem (?P<shared>\d+)")
# (graph folder, kernel name without its number): a persistent reduction tuned from its one config, and the
# first half of a split looped reduction tuned after its five configs were benchmarked
COORDESC_KERNELS = [("model__0_inference_0.0", "triton_per_fused__softmax_add_exp_prepare_softmax_online_relu_sub"),
                    ("model__1_inference_1.1", "triton_red_fused_mul_sum")]


@pytest.fixture
def workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    program, fixtures = getattr(request, "param", ("autotune_gemm", TRAIN))
    return gpu_workspace(tmp_path / "ws", program, fixtures)


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, workspace: Path):
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


async def hover(client: LanguageClient, path: Path, line0: int) -> str:
    result = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(path.as_uri()), types.Position(line0, 4)))
    return "" if result is None else result.contents.value


def output_code(workspace: Path, graph: str) -> Path:
    return next(workspace.glob(f"torch_compile_debug/run_*/torchinductor/{graph}/output_code.py"))


def kernel_named(code: Path, stem: str) -> str:
    (name,) = re.findall(rf"^def ({stem}_\d+)\(", code.read_text(), re.MULTILINE)
    return name


def own_record(workspace: Path, code: Path, name: str) -> dict:
    """The .best_config beside the kernel's own file (its `# kernel path:` in output_code.py)."""
    lines = code.read_text().splitlines()
    at = next(i for i, text in enumerate(lines) if text.startswith(f"{name} = async_compile.triton("))
    path = Path(next(lines[i] for i in range(at, 0, -1) if lines[i].startswith("# kernel path: ")).split(": ", 1)[1])
    (record,) = [json.loads(p.read_text()) for p in path.parent.glob("*.best_config")
                 if f"def {name}(" in path.read_text()]
    return record


def search_lines(workspace: Path, name: str) -> list[re.Match]:
    """The COORDESC lines of the kernel's search: after the log first names it, up to `has best config`."""
    log = (workspace / "prog_stderr.txt").read_text().splitlines()
    start = next(i for i, text in enumerate(log) if f"configs for {name}" in text)
    end = next(i for i in range(start, len(log)) if "has best config" in log[i])
    return [m for text in log[start:end] if (m := TIMING.search(text))]


def launch_of(workspace: Path, name: str) -> dict:
    (trace,) = workspace.glob("profiler_traces/*.pt.trace.json")
    return next(e["args"] for e in json.loads(trace.read_text())["traceEvents"]
                if e.get("cat") == "kernel" and e["name"] == name)


def entry_of(workspace: Path, name: str, record: dict, timing: re.Match) -> Path:
    """The cache entry with the record's warps and stages and the registers and shared memory logged for it."""
    found = []
    for meta in workspace.glob(f"torch_compile_debug/run_*/triton_cache/*/{name}.json"):
        data = json.loads(meta.read_text())
        usage = meta.with_name(f"{name}.res_usage.txt").read_text()
        if (data["num_warps"], data["num_stages"], data["shared"]) == \
                (record["num_warps"], record["num_stages"], int(timing["shared"])) and f"REG:{timing['nreg']} " in usage:
            found.append(meta.parent)
    (entry,) = found
    return entry


@pytest.mark.parametrize("graph,stem", COORDESC_KERNELS)
async def test_the_config_coordinate_descent_kept_links_its_cache_entry(client: LanguageClient, workspace: Path,
                                                                         graph: str, stem: str):
    code = output_code(workspace, graph)
    name = kernel_named(code, stem)
    record = own_record(workspace, code, name)
    assert record["found_by_coordesc"] is True and record["triton_cache_hash"] is None  # Inductor's gap
    tried = search_lines(workspace, name)
    blocks = {k: v for k, v in record.items() if k.endswith("BLOCK")}
    kept = next(m for m in tried if all(f"{k}: {v}," in m["config"] + "," for k, v in blocks.items())
                and f"num_warps: {record['num_warps']}," in m["config"])
    entry = entry_of(workspace, name, record, kept)
    # the profiler saw that entry launched: its registers, its warps' threads, and xnumel over the record's XBLOCK
    launch = launch_of(workspace, name)
    assert f"REG:{launch['registers per thread']} " in (entry / f"{name}.res_usage.txt").read_text()
    assert launch["block"][0] == 32 * record["num_warps"]
    xnumel = int(re.search(rf"def {name}\(.*?\n\s+xnumel = (\d+)", code.read_text(), re.DOTALL)[1])
    assert launch["grid"][0] == xnumel // record["XBLOCK"]

    text = await hover(client, code, line_of(code, f"def {name}("))
    assert f"cache entry [`{entry.name[:12]}`]({(entry / f'{name}.json').as_uri()}), coordinate descent;" in text
    assert f"{kept['nreg']} registers · {kept['nspill']} spilled" in text
    assert all(f"{k}={v}" in text for k, v in blocks.items())
    assert f"**Coordinate descent**: {len(tried)} configs benchmarked" in text

    lines = code.read_text().splitlines()
    line = next(i for i in range(line_of(code, f"def {name}("), len(lines)) if "tl.store(" in lines[i])
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelLens.tritonChain", arguments=[{"uri": code.as_uri(), "line": line}]))
    assert (answer["kernel"], answer["entry"]) == (name, entry.name)
    launch_json = answer["launch"]
    assert launch_json["chosen_by"] == "coordinate descent"
    searched = [t for t in launch_json["tried"] if t["search"] == "coordinate descent"]
    assert [(t["config"], t["ms"], t["registers"]) for t in searched] == sorted(
        ((m["config"], float(m["ms"]), int(m["nreg"])) for m in tried), key=lambda t: t[1])
    assert [t["config"] for t in launch_json["tried"] if t["chosen"]] == [kept["config"]]
    settings = {s["name"]: (s["value"], s["origin"]) for s in launch_json["settings"]}
    assert {k: settings[k] for k in blocks} == {k: (str(v), ".best_config") for k, v in blocks.items()}
    # the kept entry's chain is in the fixture: its SASS leads back to the same Triton line
    assert set(answer["stages"]) == {"ttir", "ttgir", "llir", "ptx", "sass"}
    sass = answer["stages"]["sass"]
    assert sass["lines"]
    back = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelLens.tritonChain", arguments=[{"uri": sass["uri"], "line": sass["lines"][0]}]))
    assert (back["entry"], back["triton"]) == (entry.name, answer["triton"])


@pytest.mark.parametrize("workspace", [("mlp_train", GPU_FIXTURES)], indirect=True)
async def test_a_looped_reduction_given_one_config_shows_its_r0_block(client: LanguageClient, workspace: Path):
    """`triton_red_fused_sum_1` takes R0_BLOCK as a parameter and loops over r0 with it; with one config nothing
    autotunes and its source fixes nothing: the R0_BLOCK it ran with is the `only_config` Inductor logged."""
    code = output_code(workspace, "model__0_backward_3.1")
    name = "triton_red_fused_sum_1"
    body = code.read_text().split(f"def {name}(", 1)[1]
    assert body.split("\n", 1)[0].count("R0_BLOCK : tl.constexpr") == 1  # a parameter, not fixed in the source
    assert "for r0_offset in tl.range(0, r0_numel, R0_BLOCK):" in body.split("'''", 1)[0]
    (log,) = workspace.glob("torch_trace/*.log")
    (only,) = {tuple(map(tuple, json.loads(line[1:])[name]["only_config"])) for line in log.read_text().splitlines()
               if line.startswith("\t{") and f'"{name}"' in line}
    only = dict(only)
    text = await hover(client, code, line_of(code, f"def {name}("))
    assert f"**Triton**: launched with R0_BLOCK={only['R0_BLOCK']} (only config) · XBLOCK={only['XBLOCK']} " \
           f"(only config)" in text, text


def launched(workspace: Path) -> dict[str, tuple[str | None, str]]:
    from lsp_server.loading.run_loader import load_run

    (run,) = workspace.glob("torch_compile_debug/run_*")
    return {k.name: (k.gpu.chosen.key if k.gpu.chosen else None, k.gpu.chosen_by)
            for g in load_run(run).graphs for k in g.kernels if k.gpu is not None and k.language == "triton"}


def test_without_the_heuristics_log_the_profiled_launch_names_the_same_entry(workspace: Path):
    """Most users run without TORCH_LOGS: the registers the profiler saw launched, among the entries with the
    record's warps and stages, name the same entry; with neither log nor trace, which one ran is left unknown."""
    logged = launched(workspace)
    assert {how for _, how in logged.values()} == {"coordinate descent"} and len(logged) == 3
    (workspace / "prog_stderr.txt").unlink()
    assert launched(workspace) == logged
    for trace in workspace.glob("profiler_traces/*.pt.trace.json"):
        trace.unlink()
    assert {name: how for name, (_, how) in launched(workspace).items()} == {name: "unknown" for name in logged}
