"""A function's hover on a run of our real backend, for a softmax compiled in bfloat16: did my bf16 stay bf16 (each
kernel's arguments as they are in memory and the dtype it computes them in), and why its loops look as they do
(each planning pass's decision and reason, from kernel_plans.json)."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest_lsp
from lsp_workspaces import SERVER, start_session
from lsprotocol import types
from pytest_lsp import LanguageClient

PROGRAM = textwrap.dedent("""
    import torch

    def scaled_softmax(x):
        return torch.softmax(x * 2, dim=-1)

    x = torch.randn(64, 256).to(torch.bfloat16)
    torch.compile(scaled_softmax, backend="lens")(x)
""")
DEF_LINE = 3  # 0-based


@pytest_lsp.fixture(config=SERVER)
async def half_client(lsp_client: LanguageClient, tmp_path: Path):
    script = tmp_path / "half_prog.py"
    script.write_text(PROGRAM)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=dict(os.environ, LENS_DEBUG="1"),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    await start_session(lsp_client, tmp_path)
    yield script
    await lsp_client.shutdown_session()


async def function_hover(client: LanguageClient, script: Path) -> str:
    hover = None
    for _ in range(100):  # the watcher indexes the run shortly after the session starts
        hover = await client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(script.as_uri()), types.Position(DEF_LINE, 6)))
        if hover is not None and "arguments:" in hover.contents.value:
            return hover.contents.value
        await asyncio.sleep(0.1)
    raise AssertionError(f"no hover with the kernels' arguments on the compiled function: {hover}")


async def test_hover_gives_each_kernels_argument_dtypes_and_compute_dtype(half_client: LanguageClient, tmp_path):
    text = await function_hover(half_client, tmp_path / "half_prog.py")
    arguments = [line for line in text.splitlines() if line.startswith("arguments:")]
    assert arguments, text
    assert any("`in_ptr0` in bfloat16[64, 256] (computed in float32)" in line for line in arguments), arguments
    assert any("out bfloat16[64, 256]" in line for line in arguments), arguments


async def test_hover_says_why_the_kernels_loops_look_as_they_do(half_client: LanguageClient, tmp_path):
    text = await function_hover(half_client, tmp_path / "half_prog.py")
    plan = text[text.index("plan (why these loops):"):].splitlines()
    decisions = [line for line in plan[1:] if line.startswith("- ")]
    # the row kernel's own choices, each with its reason: threads for 16K elements, and its output's store
    assert any(line.startswith("- threads: threads — 16384 elements of work >= config.cpp.min_chunk_size")
               for line in decisions), plan
    assert any("streaming" in line and "config.cpp.streaming_store_min_bytes" in line for line in decisions), plan
