"""Issue 47: a Triton kernel's launched config on the committed H100 training step. The chain's `launch` lists
the configs autotuning tried (the Triton heuristics' log in prog_stderr.txt: each config, its time, registers,
spills) and the chosen one; block sizes come from the autotune records, else from the kernel's source (a
persistent reduction's `R0_BLOCK: tl.constexpr`), else from the profiled launch's grid (`xnumel` over the
grid's x): the rule is checked here against every autotuned kernel's `.best_config` first."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import pytest_lsp
from lsp_workspaces import FIXTURES, SERVER, gpu_workspace, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient
from trace_workspaces import line_of

TRAIN = FIXTURES / "inductor_gpu_train"
SOFTMAX = "triton_per_fused__softmax_div_exp_masked_fill_prepare_softmax_online_sub_view_3"
SINGLE = "triton_per_fused__log_softmax_prepare_softmax_online_11"  # one config: no autotune record
TIMING = re.compile(r"[\]:] (?P<config>XBLOCK: .*?): (?P<ms>[0-9.]+), nreg (?P<nreg>\d+), nspill (?P<nspill>\d+),")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return gpu_workspace(tmp_path / "ws", "transformer_train", TRAIN)


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient, workspace: Path):
    await start_session(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


def forward_code(workspace: Path) -> Path:
    return next(workspace.glob("torch_compile_debug/run_*/torchinductor/model__0_forward_1.0/output_code.py"))


def kernel_body(code: Path, kernel: str) -> list[str]:
    lines = code.read_text().splitlines()
    start = next(n for n, text in enumerate(lines) if text.startswith(f"def {kernel}("))
    end = next(n for n in range(start + 1, len(lines)) if lines[n].startswith("'''"))
    return lines[start:end]


def numel(body: list[str]) -> int:
    return int(next(m[1] for text in body if (m := re.match(r"\s+xnumel = (\d+)$", text))))


def grids(workspace: Path) -> dict[str, list[int]]:
    (trace,) = workspace.glob("profiler_traces/*.pt.trace.json")
    events = json.loads(trace.read_text())["traceEvents"]
    return {e["name"]: e["args"]["grid"] for e in events
            if e.get("cat") == "kernel" and e["name"].startswith("triton_")}


def best_configs(workspace: Path) -> dict[str, dict]:
    """Kernel name -> its .best_config (the record's kernel: the `.py` beside it in inductor_cache)."""
    found = {}
    for record in workspace.glob("inductor_cache/*/*.best_config"):
        for source in record.parent.glob("*.py"):
            name = re.search(r"def (triton_\w+)\(", source.read_text())
            if name:
                found[name[1]] = json.loads(record.read_text())
    return found


def test_the_grid_rule_gives_every_autotuned_kernels_recorded_xblock(workspace: Path):
    """Ground truth for the rule the server applies: where .best_config recorded XBLOCK, xnumel / grid x is it."""
    code, launched, records = forward_code(workspace), grids(workspace), best_configs(workspace)
    checked = 0
    for name, record in records.items():
        if name not in launched or f"def {name}(" not in code.read_text() or "YBLOCK" in record:
            continue
        assert numel(kernel_body(code, name)) // launched[name][0] == record["XBLOCK"], name
        checked += 1
    assert checked >= 8


async def test_the_chain_shows_the_configs_tried_and_the_chosen_one(client: LanguageClient, workspace: Path):
    code = forward_code(workspace)
    line = line_of(code, f"def {SOFTMAX}(") + 10  # a line of its body
    answer = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="kernelLens.tritonChain", arguments=[{"uri": code.as_uri(), "line": line}]))
    assert answer["kernel"] == SOFTMAX
    log = (workspace / "prog_stderr.txt").read_text().splitlines()
    start = next(n for n, text in enumerate(log) if f"Benchmark all input configs for {SOFTMAX}," in text)
    end = next(n for n in range(start, len(log)) if f"Best config for {SOFTMAX}:" in log[n])
    rows = [m for text in log[start + 1:end] if (m := TIMING.search(text))]
    best = TIMING.search(next(text for text in log if f"Best config for {SOFTMAX}:" in text))
    launch = answer["launch"]
    assert [(t["config"], t["ms"], t["registers"], t["spills"]) for t in launch["tried"]] == sorted(
        ((m["config"], float(m["ms"]), int(m["nreg"]), int(m["nspill"])) for m in rows), key=lambda t: t[1])
    assert [t["config"] for t in launch["tried"] if t["chosen"]] == [best["config"]] and len(rows) == 3
    r0_block = next(m[1] for text in kernel_body(code, SOFTMAX) if (m := re.match(r"\s+R0_BLOCK: tl.constexpr = (\d+)$",
                                                                                     text)))
    settings = {s["name"]: (s["value"], s["origin"]) for s in launch["settings"]}
    xblock, warps = re.search(r"XBLOCK: (\d+), num_warps: (\d+)", best["config"]).groups()
    assert settings == {"XBLOCK": (xblock, ".best_config"), "R0_BLOCK": (r0_block, "kernel source"),
                        "num_warps": (warps, "cache entry"), "num_stages": ("1", "cache entry")}
    assert launch["chosen_by"] == ".best_config"


async def test_a_single_config_kernels_block_sizes_from_its_source_and_launch_grid(client: LanguageClient,
                                                                                   workspace: Path):
    code = forward_code(workspace)
    body = kernel_body(code, SINGLE)
    assert SINGLE not in best_configs(workspace) and f"configs for {SINGLE}" not in \
        (workspace / "prog_stderr.txt").read_text()
    r0_block = next(m[1] for text in body if (m := re.match(r"\s+R0_BLOCK: tl.constexpr = (\d+)$", text)))
    xblock = numel(body) // grids(workspace)[SINGLE][0]
    result = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(code.as_uri()), types.Position(line_of(code, f"def {SINGLE}("), 4)))
    text = result.contents.value
    assert f"R0_BLOCK={r0_block} (kernel source) · XBLOCK={xblock} (launch grid)" in text, text
    assert "only entry" in text
