"""`python -m lsp_server index DIR [--json]`: the CLI the lead's `kernel-lens index` runs as a subprocess."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lens_foo1_fixture import KERNEL, KERNEL_END, KERNEL_NEG_LINE, KERNEL_START
from lsp_workspaces import COMPILE_ERROR_RUN, OK_RUN

KERNEL_LINES = f"output_code.py:{KERNEL_START + 1}-{KERNEL_END + 1}"  # 1-based, as the index prints them


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lsp_server", *args], capture_output=True, text=True, timeout=120)


def test_index_json_lists_runs_graphs_kernels_and_mappings(lens_workspace: Path) -> None:
    from lsp_workspaces import copy_run
    copy_run(COMPILE_ERROR_RUN, lens_workspace)
    done = run_cli("index", str(lens_workspace), "--json")
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)["runs"]
    assert [(r["id"], r["kind"]) for r in runs] == [(OK_RUN, "lens"), (COMPILE_ERROR_RUN, "lens")]
    graph = runs[0]["graphs"][0]
    assert graph["status"] == "ok" and runs[1]["graphs"][0]["status"] == "compile_error"
    [kernel] = graph["kernels"]
    assert kernel["name"] == KERNEL and kernel["output_code_lines"] == [KERNEL_START + 1, KERNEL_END + 1]
    assert {"output_code_line": KERNEL_NEG_LINE + 1, "nodes": ["neg"]} in kernel["lines"]
    neg = next(n for n in graph["nodes"] if n["name"] == "neg")
    assert neg["source"] == {"file": str(lens_workspace / "foo1.py"), "line": 5, "function": "foo1",
                             "code": "a = torch.neg(x1)"}


def test_index_text_and_usage_errors(lens_workspace: Path, tmp_path: Path) -> None:
    text = run_cli("index", str(lens_workspace))
    assert text.returncode == 0 and f"{KERNEL} (pointwise) {KERNEL_LINES}" in text.stdout
    assert f"{lens_workspace / 'foo1.py'}:6  b = torch.maximum(x2, a)" in text.stdout
    assert run_cli("index", str(tmp_path / "missing")).returncode == 2
    assert run_cli("bogus").returncode == 2
