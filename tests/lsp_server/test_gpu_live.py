"""Issue 47 on a fresh GPU run (needs a CUDA GPU; skipped without one): compile a small program with
TORCH_COMPILE_DEBUG and a fresh TRITON_CACHE_DIR, keep its Triton cache entries beside the debug dir, index it,
and follow its SASS lines back to the user's lines."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lsp_server.features.gpu_kernels import chain_json
from lsp_server.features.lookup import uri_of
from lsp_server.index import Index
from lsp_server.loading.keep_triton import keep_triton_entries
from lsp_server.loading.run_loader import load_run

PROGRAM = '''import torch

def f(x, y):
    z = torch.sigmoid(x) * y
    return z + 1.0

compiled = torch.compile(f)
x, y = torch.randn(4096, 512, device="cuda"), torch.randn(4096, 512, device="cuda")
print(float(compiled(x, y).sum()))
'''


@pytest.mark.gpu
def test_fresh_run_kept_indexed_and_chained_from_sass_to_the_users_line(tmp_path: Path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    (tmp_path / "prog.py").write_text(PROGRAM)
    env = {**os.environ, "TORCH_COMPILE_DEBUG": "1", "TORCHINDUCTOR_UNIQUE_KERNEL_NAMES": "1",
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor_cache"), "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    done = subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (run_dir,) = tmp_path.glob("torch_compile_debug/run_*")
    assert keep_triton_entries(run_dir, [tmp_path / "triton"]) >= 1
    index = Index()
    index.put_run(load_run(run_dir))
    (graph,) = index.views[index.current_run_id()].run.graphs
    (kernel,) = [k for k in graph.kernels if k.language == "triton"]
    assert kernel.gpu.chosen_by in ("only entry", ".best_config") and kernel.gpu.chosen.usage.registers > 0
    prog = (tmp_path / "prog.py").resolve()
    user = PROGRAM.splitlines()
    for stage in ("sass", "ptx"):
        path = kernel.gpu.chosen.stage_path(stage)
        assert path is not None, f"no {stage} kept (nvdisasm missing?)"
        answers = [chain_json(index, uri_of(str(path)), n) for n in range(len(path.read_text().splitlines()))]
        answers = [a for a in answers if "error" not in a]
        assert answers and {Path(a["source"]["uri"].removeprefix("file://")).resolve() for a in answers} == {prog}
        if stage == "ptx":  # PTX keeps inlined code's call site: tl.sigmoid's line, its node, the user's line
            precise = {a["source"]["line"] for a in answers if a["precision"] == "line"}
            assert user.index("    z = torch.sigmoid(x) * y") in precise, sorted(precise)
