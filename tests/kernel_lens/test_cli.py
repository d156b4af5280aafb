"""`kernel-lens`: the compiler's commands and the language server's `index`/`trace` reports in one process (the
server's reports used to run as a `python -m lsp_server` child of the compiler's CLI)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_lens import cli

REPO = Path(__file__).resolve().parents[2]
FOO1_RUNS = REPO / "tests" / "fixtures" / "lens_foo1" / "runs"
TRACE_FIXTURES = REPO / "tests" / "fixtures" / "torch_trace"


@pytest.fixture
def no_child_processes(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError(f"kernel-lens started a child process: {args}")
    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)


def test_index_is_printed_in_process(no_child_processes, capsys):
    assert cli.main(["index", str(FOO1_RUNS), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    kernels = {k["name"] for run in report["runs"] for g in run["graphs"] for k in g["kernels"]}
    assert "cpp_fused_cat_maximum_neg_0" in kernels


def test_trace_is_printed_in_process(no_child_processes, capsys):
    assert cli.main(["trace", str(TRACE_FIXTURES)]) == 0
    assert "graph break" in capsys.readouterr().out.lower()


def test_the_command_lists_both_halves_and_the_compiler_alone_its_own():
    listed = subprocess.run([sys.executable, "-m", "kernel_lens", "--help"], capture_output=True, text=True,
                            cwd=REPO, timeout=120)
    assert listed.returncode == 0 and all(v in listed.stdout for v in ("compile", "profile", "index", "trace"))
    alone = subprocess.run([sys.executable, "-m", "compiler", "index", str(FOO1_RUNS)], capture_output=True,
                           text=True, cwd=REPO, timeout=120)
    assert alone.returncode == 2 and "invalid choice: 'index'" in alone.stderr
