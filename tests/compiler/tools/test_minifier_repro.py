"""repro.py, as `kernel-lens minify` writes it: its header names the failure in plain words and the file to
run, and running that file reproduces the failure."""
import re
import subprocess
import sys

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import compiler.config as config
from compiler.pipeline import compile_quietly
from compiler.tools.minifier import minify, write_repro


def program(x1, x2):
    a = torch.neg(x1)
    b = torch.maximum(x2, a)
    return (torch.cat([b * 2, b], dim=1),)  # a tuple, as AOTAutograd graphs return


def test_repro_header_names_the_failure_and_the_file_to_run(tmp_path, monkeypatch):
    monkeypatch.setattr(config.cpp, "op_overrides", {"neg": "decltype({x})(2 * {x})"})
    inputs = [torch.randn(1, 8), torch.randn(64, 8)]
    gm = make_fx(program)(*inputs)
    best, failure = minify(gm, inputs, compile_quietly, log=lambda line: None)
    debug_dir = tmp_path / "run_x" / "lens" / "graph_0"
    debug_dir.mkdir(parents=True)
    path = write_repro(str(debug_dir), best, failure)
    assert path == str(debug_dir / "repro.py")
    title, how = (debug_dir / "repro.py").read_text().splitlines()[:2]
    assert re.fullmatch(r"# Minified repro of an accuracy mismatch \(max abs error [0-9.e+-]+\); "
                        r"written by kernel-lens minify", title), title
    assert how == f"# Runs standalone: `python {path}` (eager vs lens, compared)."
    command = re.search(r"`python (.+)`", how).group(1)
    proc = subprocess.run([sys.executable, command], capture_output=True, text=True, timeout=300, cwd="/")
    assert proc.returncode != 0 and "not close" in proc.stderr  # the mismatch, reproduced from anywhere
