"""Did my bf16 stay bf16? A function compiled in bfloat16 by our real backend: its hover gives each kernel's
arguments as they are in memory (bfloat16 and their shapes) and the dtype the kernel computes them in."""
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


async def test_hover_gives_each_kernels_argument_dtypes_and_compute_dtype(half_client: LanguageClient, tmp_path):
    script = tmp_path / "half_prog.py"
    hover = None
    for _ in range(100):  # the watcher indexes the run shortly after the session starts
        hover = await half_client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(script.as_uri()), types.Position(DEF_LINE, 6)))
        if hover is not None and "arguments:" in hover.contents.value:
            break
        await asyncio.sleep(0.1)
    assert hover is not None, "no hover on the compiled function"
    text = hover.contents.value
    arguments = [line for line in text.splitlines() if line.startswith("arguments:")]
    assert arguments, text
    assert any("`in_ptr0` in bfloat16[64, 256] (computed in float32)" in line for line in arguments), arguments
    assert any("out bfloat16[64, 256]" in line for line in arguments), arguments
