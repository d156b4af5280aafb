"""C++ build failures: ours (seed's `-{x}` override) and real Inductor's, mapped to the user's line."""
import json
import pathlib

import pytest
import torch

from compiler import config
from compiler.debug.compile_error import LensCompileError
from compiler.machine import build

NEG_LINE = 17  # the `a = torch.neg(x1)` line below
MAX_LINE = 18


def foo1(x1, x2):
    a = torch.neg(x1)
    b = torch.maximum(x2, a)
    return torch.cat([b], dim=1)


def test_line_constants_point_at_the_code():
    lines = pathlib.Path(__file__).read_text().splitlines()
    assert lines[NEG_LINE - 1].strip() == "a = torch.neg(x1)"
    assert lines[MAX_LINE - 1].strip() == "b = torch.maximum(x2, a)"


@pytest.fixture
def neg_override(tmp_path):
    old = dict(config.cpp.op_overrides), config.debug, config.debug_dir_root
    config.cpp.op_overrides = {"neg": "-{x}"}
    config.debug, config.debug_dir_root = True, str(tmp_path)
    torch._dynamo.reset()
    yield tmp_path
    config.cpp.op_overrides, config.debug, config.debug_dir_root = old


def test_seed_compile_error_names_the_source_line(neg_override):
    x1 = torch.randint(0, 256, (1, 8), dtype=torch.uint8)
    x2 = torch.randint(0, 256, (8390, 8), dtype=torch.uint8)
    with pytest.raises(Exception) as info:
        torch.compile(foo1, backend="lens")(x1, x2)
    err = info.value
    while not isinstance(err, LensCompileError) and err.__cause__ is not None:
        err = err.__cause__
    text = str(info.value)
    assert f"{__file__}:{MAX_LINE}" in text and "max_propagate_nan" in text
    graph_dir = next(pathlib.Path(neg_override).glob("run_*/lens/graph_*"))
    report = json.loads((graph_dir / "compile_error.json").read_text())
    first = next(d for d in report["diagnostics"] if d["severity"] == "error")
    assert first["nodes"] == ["maximum"] and first["source"]["line"] == MAX_LINE
    assert first["kernel"].startswith("cpp_fused_") and first["output_code_line"] > 0
    code = (graph_dir / "output_code.py").read_text().splitlines()
    assert "max_propagate_nan" in code[first["output_code_line"] - 1]
    kmap = json.loads((graph_dir / "kernel_map.json").read_text())
    assert kmap["status"] == "compile_error"


def test_diagnostics_parse_gcc_lines():
    text = ("/x/k.cpp: In function 'void k()':\n/x/k.cpp:24:58: error: no matching function\n"
            "/x/h.h:964:17: note: candidate: 'T f(T, T)'\n")
    diags = build.parse_diagnostics(text)
    assert [(d.file, d.line, d.column, d.severity) for d in diags] == [("/x/k.cpp", 24, 58, "error"),
                                                                       ("/x/h.h", 964, 17, "note")]


def test_missing_compiler_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(config.cpp, "cxx", "no-such-compiler-g++")
    build.compiler_version.cache_clear()
    with pytest.raises(build.CompilerNotFoundError, match="not found on PATH"):
        build.build_shared_library('extern "C" void f() {}')
    build.compiler_version.cache_clear()
