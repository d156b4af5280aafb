"""Accuracy reports judge elements as torch.testing.assert_close does: relative error only where it means
something, the worst failing element, and which tolerance failed; accuracy.json keeps its old fields."""
import json
import math
import pathlib
import subprocess
import sys
import textwrap

import torch

from compiler.tools.accuracy import compare, difference_fields

OLD_FIELDS = {"version", "graph_id", "status", "node", "target", "readable_line", "kernel", "source",
              "max_abs_error", "max_rel_error", "atol", "rtol"}  # what lsp_server/parsers/accuracy.py reads


def test_zeros_in_expected_give_no_relative_error():
    expected = torch.tensor([0.0, 0.0, 2.0, -4.0])
    got = torch.tensor([7.75993, 0.0, 2.0, -4.0])
    d = compare(expected, got, 1e-4)
    assert d.max_abs_error == torch.tensor(7.75993).item()
    assert math.isnan(d.max_rel_error) and difference_fields(d)["max_rel_error"] is None  # not 7.75993e+12
    assert d.failed_tolerance == "atol" and d.mismatched == 1 and d.numel == 4
    assert d.worst.index == (0,) and d.worst.expected == 0.0 and d.worst.rel_error is None
    text = d.describe()
    assert "e+12" not in text and "the atol bound failed" in text and "atol 0.0001, rtol 0.0001" in text


def test_relative_error_of_large_values_names_rtol_and_the_worst_element():
    expected = torch.tensor([[100.0, 1.0], [-50.0, 0.0]])
    got = torch.tensor([[101.0, 1.0], [-50.25, 0.0]])
    d = compare(expected, got, 1e-4)
    assert d.failed_tolerance == "rtol" and d.mismatched == 2
    assert d.max_abs_error == 1.0 and d.max_rel_error == 0.01
    assert d.worst.index == (0, 0) and (d.worst.abs_error, d.worst.rel_error) == (1.0, 0.01)
    assert "worst at [0, 0]: expected 100, got 101, abs error 1, rel error 0.01" in d.describe()


def test_failures_on_both_sides_of_atol_over_rtol_fail_both():
    d = compare([torch.ones(2), torch.tensor([0.0, 10.0])], [torch.ones(2), torch.tensor([0.5, 11.0])], 1e-3)
    assert d.output == 1 and d.failed_tolerance == "both" and d.max_rel_error == 0.1
    assert d.describe().startswith("output 1: 2 of 2 element(s)") and "both bounds failed" in d.describe()


def test_elements_within_tolerance_are_not_errors():
    expected = torch.tensor([1000.0, 0.0])
    assert compare(expected, torch.tensor([1000.05, 0.00005]), 1e-4) is None  # 0.05 <= 1e-4 + 1e-4 * 1000
    assert compare(torch.tensor([math.inf]), torch.tensor([math.inf]), 0.0) is None
    d = compare(torch.tensor([math.inf, 1.0]), torch.tensor([1.0, 1.0]), 1e-4)
    assert d.failed_tolerance == "infinity" and d.worst.index == (0,)


SCRIPT = """
import torch

def f(x):
    return torch.neg(x) * 1.0

x = torch.tensor([[0.0, 0.0, 2.0, 4.0]] * 8)
torch.compile(f, backend="lens")(x)
"""


def test_check_accuracy_report_of_a_bug_that_writes_into_zeros(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent(SCRIPT))
    # neg computes 1 - x: off by exactly 1 everywhere, also where eager's -x is 0
    proc = subprocess.run([sys.executable, "-m", "compiler", "check-accuracy", str(script),
                           "--op-override", "neg=decltype({x})(1 - {x})"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    path = next(pathlib.Path(tmp_path).glob("torch_compile_debug/run_*/lens/graph_0/accuracy.json"))
    report = json.loads(path.read_text())
    assert OLD_FIELDS <= set(report) and report["status"] == "mismatch" and report["node"] == "neg"
    assert report["max_abs_error"] == 1.0 and report["max_rel_error"] == 0.5  # 1 / |-2|; zeros left out
    assert report["atol"] == report["rtol"] == 1e-4
    assert report["failed_tolerance"] == "both"
    assert report["mismatched_elements"] == report["elements"] == 32
    assert report["worst"] == {"index": [0, 0], "expected": 0.0, "got": 1.0, "abs_error": 1.0, "rel_error": None}
    assert "first diverging node neg" in proc.stdout and "both bounds failed" in proc.stdout
    assert "max rel error 0.5" in proc.stdout and "e+12" not in proc.stdout
