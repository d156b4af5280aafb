"""The g++ build: cache hits across names, and the vectorization report written in debug mode."""
import os

from compiler import build, config

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
    so = build.build_shared_library(SOURCE + "\n// debug build\n", "graph_0")
    report = open(os.path.join(os.path.dirname(so), "vectorization.txt")).read()
    assert report.startswith("gather_kernel:") and ("vectorize" in report)
    line = int(report.splitlines()[0].split(":")[1])
    assert "for (long i" in SOURCE.splitlines()[line - 1] or "out[i]" in SOURCE.splitlines()[line - 1]
