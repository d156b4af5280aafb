"""The g++ build: cache hits across names, and the vectorization report (written in debug mode, made on demand
for libraries built without it)."""
import os

from compiler import config
from compiler.machine import build

SOURCE = r'''
extern "C" void gather_kernel(const float* __restrict__ in, const long* __restrict__ idx, float* __restrict__ out)
{
    for (long i = 0; i < 1024; i++)
    {
        out[i] = in[idx[i]] + out[i / 7];
    }
}
'''


def test_same_source_under_another_name_hits_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LENS_CACHE_DIR", str(tmp_path))
    first = build.build_shared_library(SOURCE, "graph_0")
    assert os.path.exists(first)
    mtime = os.path.getmtime(first)
    assert build.build_shared_library(SOURCE, "graph_7") == first
    assert os.path.getmtime(first) == mtime


def test_debug_build_explains_loops_left_scalar(tmp_path, monkeypatch):
    monkeypatch.setenv("LENS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(config, "debug", True)
    source = SOURCE + "\n// debug build\n"
    build.build_shared_library(source, "graph_0")
    report = "\n".join(build.vectorization_report(source, build.opt_info_report(source)))
    assert report.startswith("gather_kernel:") and ("vectorize" in report)
    line = int(report.splitlines()[0].split(":")[1])
    assert "for (long i" in SOURCE.splitlines()[line - 1] or "out[i]" in SOURCE.splitlines()[line - 1]


def test_debug_dir_has_the_vectorization_report_in_output_code_lines(tmp_path, monkeypatch):
    import torch
    monkeypatch.setenv("LENS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(config, "debug", True)
    monkeypatch.setattr(config, "debug_dir_root", str(tmp_path / "debug"))
    torch._dynamo.reset()
    x = torch.randn(6, 10)
    torch.compile(lambda a: a.t().contiguous() * 2 + a.t().sum(1, keepdim=True), backend="lens")(x)
    graph = next((tmp_path / "debug").glob("run_*/lens/graph_*"))
    report = (graph / "vectorization.txt").read_text().splitlines()
    code = (graph / "output_code.py").read_text().splitlines()
    assert report[0].startswith("# ")
    assert len(report) > 1, report
    for line in report[1:]:  # kernel:LINE names the output_code.py line the reason is about
        kernel, number, _ = line.split(":", 2)
        assert kernel.startswith("cpp_fused_") and line.split("| ", 1)[1] == code[int(number) - 1].strip()


def test_a_library_built_outside_debug_mode_gets_its_report_when_asked(tmp_path, monkeypatch):
    monkeypatch.setenv("LENS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(config, "debug", False)
    source = SOURCE + "\n// built without the report\n"
    build.build_shared_library(source, "graph_0")
    stored = os.path.join(build.cache_folder(source), build.OPT_INFO)
    assert not os.path.exists(stored)  # g++ was not asked for it
    report = build.vectorization_report(source, build.opt_info_report(source))
    assert report and report[0].startswith("gather_kernel:") and os.path.exists(stored)
