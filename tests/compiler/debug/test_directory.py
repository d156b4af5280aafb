"""The debug directory never breaks a compile: a folder that cannot be made, a file where a folder should be,
or data JSON cannot hold is warned about once and the compiled function still gives eager's results."""
import itertools
import json
import logging
import os
import subprocess
import sys

import pytest
import torch

import compiler
from compiler import config, pipeline
from compiler.debug import directory as debug
from compiler.debug import kernel_map


def _fn(x):
    return torch.relu(x) * 2 + 1


@pytest.fixture
def debug_root(monkeypatch):
    def use(root):
        monkeypatch.setattr(config, "debug", True)
        monkeypatch.setattr(config, "debug_dir_root", str(root))
        monkeypatch.setattr(debug, "_WARNED", set())
    return use


def _compile_and_check(caplog) -> list[str]:
    torch._dynamo.reset()
    x = torch.randn(64, 33)
    with caplog.at_level(logging.WARNING, logger="compiler.debug.directory"):
        got = torch.compile(_fn, backend="lens")(x)
    torch.testing.assert_close(got, _fn(x))
    return [r.getMessage() for r in caplog.records if r.name == "compiler.debug.directory"]


def test_a_root_that_cannot_be_made_warns_once_and_compiles(debug_root, caplog):
    debug_root("/proc/kernel-lens-cannot-write-here")  # read-only even for root
    warnings = _compile_and_check(caplog)
    assert len(warnings) == 1 and "no debug directory could be made" in warnings[0], warnings


def test_a_file_where_the_root_should_be(debug_root, caplog, tmp_path):
    blocker = tmp_path / "torch_compile_debug"
    blocker.write_text("not a folder")
    debug_root(blocker)
    warnings = _compile_and_check(caplog)
    assert len(warnings) == 1, warnings
    assert blocker.read_text() == "not a folder"


def test_a_file_where_the_graph_folder_should_be(debug_root, caplog, tmp_path, monkeypatch):
    debug_root(tmp_path)
    run = tmp_path / "run_fixed"
    (run / "lens").mkdir(parents=True)
    monkeypatch.setattr(debug, "run_dir", lambda: str(run))
    # graph ids count from 0 for this compile (the process's count depends on how many graphs ran before it)
    monkeypatch.setattr(pipeline, "_GRAPH_IDS", itertools.count())
    for i in range(8):  # whichever of the first ids this compile takes
        (run / "lens" / f"graph_{i}").write_text("in the way")
    warnings = _compile_and_check(caplog)
    assert len(warnings) == 1 and "could not write debug file" in warnings[0], warnings


def test_data_json_cannot_hold_skips_that_file_only(debug_root, caplog, tmp_path, monkeypatch):
    debug_root(tmp_path)
    original = kernel_map.KernelMap.to_json

    def unserializable(self):
        data = original(self)
        data["meta"] = {object()}
        return data

    monkeypatch.setattr(kernel_map.KernelMap, "to_json", unserializable)
    warnings = _compile_and_check(caplog)
    assert len(warnings) == 1 and "kernel_map.json" in warnings[0], warnings
    folders = [p for p in tmp_path.glob("run_*/lens/graph_*")]
    assert folders and all((f / "output_code.py").is_file() and not (f / "kernel_map.json").exists()
                           for f in folders)


def test_writers_of_a_folderless_debug_dir_are_no_ops():
    d = debug.DebugDir("graph_x", path=None)
    d.path = None
    d.output_code("x")
    d.kernel_map({"a": 1})
    assert d.tensors("tensors/x.pt", torch.ones(1)) is None


def test_config_is_reachable_from_the_package():
    assert compiler.config is config
    done = subprocess.run([sys.executable, "-c", "import compiler, sys; compiler.config.max_fusion_size = 8; "
                           "print(compiler.config.cpp.op_overrides, 'torch' in sys.modules)"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["{}", "False"], done.stdout
