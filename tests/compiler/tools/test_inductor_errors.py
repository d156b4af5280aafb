"""compiler/tools/inductor_errors.py on a real Inductor `CppCompileError`: the failing C++ statement is mapped to the
node it computes (not to the kernel's first node, nor guessed from the function named on the line)."""
import os
import pathlib
import subprocess
import sys

import pytest

from compiler.tools.inductor_errors import _nodes_for, map_inductor_compile_error

BAD_TANH = (pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "inductor_cpu_error" / "bad_tanh.py").read_text()


@pytest.mark.timeout(900)
def test_bad_tanh_statement_maps_to_the_tanh_node_and_line(tmp_path: pathlib.Path):
    script = tmp_path / "x.py"
    script.write_text(BAD_TANH)
    env = dict(os.environ, TORCH_COMPILE_DEBUG="1", TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode != 0 and "CppCompileError" in done.stderr, done.stderr[-2000:]
    (graph_dir,) = tmp_path.glob("torch_compile_debug/run_*/torchinductor/*/")
    report = map_inductor_compile_error(done.stderr, str(graph_dir))
    (error,) = [d for d in report["diagnostics"] if d["severity"] == "error"]
    assert "bad_tanh" in error["message"] and error["kernel"] == "cpp_fused_add_mul_tanh_0"
    assert error["nodes"] == ["tanh"]
    assert error["source"]["line"] == BAD_TANH.splitlines().index("    b = torch.tanh(a)") + 1
    assert "bad_tanh" in (graph_dir / "output_code.py").read_text().splitlines()[error["output_code_line"] - 1]


def test_statement_order_decides_between_nodes_of_a_fused_kernel():
    nodes = [{"name": n, "target": f"aten.{n}.default"} for n in ("mul", "tanh", "add", "exp")]
    cpp = ["{", "auto tmp0 = in_ptr0[x0];", "auto tmp1 = static_cast<float>(2.0);", "auto tmp2 = float(tmp0 * tmp1);",
           "auto tmp3 = bad_tanh(tmp2);", "auto tmp4 = float(tmp3 + tmp1);", "auto tmp5 = std::exp(tmp4);", "}"]
    kernel = "cpp_fused_add_exp_mul_tanh_0"
    assert [n["name"] for n in _nodes_for(kernel, cpp, 5, nodes)] == ["tanh"]
    assert [n["name"] for n in _nodes_for(kernel, cpp, 7, nodes)] == ["exp"]
    assert [n["name"] for n in _nodes_for(kernel, cpp, 4, nodes)] == ["mul"]


def test_vectorised_statements_index_arithmetic_is_not_an_add_node():
    nodes = [{"name": n, "target": f"aten.{n}.default"} for n in ("mul", "tanh", "exp", "add")]
    cpp = ["auto tmp0 = at::vec::Vectorized<float>::loadu(in_ptr0 + static_cast<int64_t>(x0), 16);",
           "auto tmp1 = static_cast<float>(2.0);", "auto tmp2 = at::vec::Vectorized<float>(tmp1);",
           "auto tmp3 = tmp0 * tmp2;", "auto tmp4 = bad_vtanh(tmp3);", "auto tmp5 = tmp4.exp();",
           "auto tmp6 = static_cast<float>(1.0);", "auto tmp7 = at::vec::Vectorized<float>(tmp6);",
           "auto tmp8 = tmp5 + tmp7;"]
    assert [n["name"] for n in _nodes_for("cpp_fused_add_exp_mul_tanh_0", cpp, 5, nodes)] == ["tanh"]
