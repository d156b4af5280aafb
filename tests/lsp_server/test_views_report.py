"""reports/views.py: `kernel-lens profile-view` / `kernel-view` print, for any editor or a terminal, what the
server answers VS Code's profile and kernel views with (the same JSON as its executeCommand answers), and as text
the lens_foo1 run's kernel, times and lines."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient

from lens_foo1_fixture import KERNEL, KERNEL_NEG_LINE, KERNEL_TIMED, output_lines
from lsp_workspaces import OK_RUN


def report(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernel_lens", *args], capture_output=True, text=True, timeout=120)


async def command(client: LanguageClient, name: str, *arguments) -> object:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(name, list(arguments)))


async def test_the_json_reports_are_the_servers_answers(lens_client: LanguageClient, lens_workspace: Path):
    profile = report("profile-view", str(lens_workspace), "--json")
    assert profile.returncode == 0, profile.stderr
    answer = await command(lens_client, "kernelLens.getProfile")
    assert json.loads(profile.stdout) == [answer]
    order = [(-line["percent"], line["uri"], line["line"]) for line in answer["lines"]]
    assert len(order) > 1 and order == sorted(order)  # one kernel's lines tie: file and line order, every time
    kernel = report("kernel-view", str(lens_workspace), "--json")
    assert kernel.returncode == 0, kernel.stderr
    linked = await command(lens_client, "kernelLens.linkedLines", {"uri": (lens_workspace / "foo1.py").as_uri()})
    assert json.loads(kernel.stdout) == [linked]
    assert linked["run_id"] == OK_RUN and linked["links"]


def test_the_text_reports_say_the_kernel_its_time_and_its_lines(lens_workspace: Path):
    profile = report("profile-view", str(lens_workspace)).stdout
    assert f"run {OK_RUN}" in profile
    kernel_row = next(line for line in profile.splitlines() if KERNEL in line)
    assert f"{KERNEL_TIMED['percent']:5.1f}%" in kernel_row and "foo1.py:5" in kernel_row  # neg: its first line
    assert "foo1.py:5  a = torch.neg(x1)  <- " + KERNEL in profile

    kernel = report("kernel-view", str(lens_workspace)).stdout.splitlines()
    at = kernel.index("  foo1.py:5  a = torch.neg(x1)")
    neg = f"      output_code.py:{KERNEL_NEG_LINE + 1}  {output_lines()[KERNEL_NEG_LINE].strip()}"
    assert neg in kernel[at + 1:kernel.index("  foo1.py:6  b = torch.maximum(x2, a)")]

    empty = report("profile-view", str(lens_workspace / "torch_compile_debug" / OK_RUN / "lens" / "graph_0"))
    assert empty.stdout.startswith("no profiled runs under")
