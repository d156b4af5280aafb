"""For the golden graphs (tests/fixtures/golden_code/cases.py), kernel_plans.json carries what the plan passes decided
about each kernel's loops (reduction lanes and `omp simd reduction` operators, sibling loops, column blocks, the
streamed line blocks, exp lane cuts, the outer loops' pragmas), and each decision is what the kernel's C++ says: the
printer decides none of it. Both ways for the operators and the exp cuts: a printed one was planned."""
from __future__ import annotations

import importlib.util
import pathlib
import re
import sys

import pytest
import torch

from compiler import config
from compiler.codegen.cpp_ops import CTYPES
from tests.compiler.conftest import kernel_plans

HERE = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "golden_code"
_spec = importlib.util.spec_from_file_location("golden_code_cases", HERE / "cases.py")
cases = sys.modules.get("golden_code_cases")
if cases is None:
    cases = sys.modules["golden_code_cases"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(cases)

# beside the golden graphs: a streamed flat kernel (its vector loop by blocks of whole lines; streams at any size)
# and rows streamed by whole lines, and rows starting mid-line (a plain head first), and a column reduction in each
# index of an outer loop (a reduction over a middle axis)
EXTRA = {"streamed_flat": (lambda x: x * 3 + 1, lambda: (torch.randn(64, 1000),)),
         "streamed_rows": (lambda x: x - x.amax(-1, keepdim=True), lambda: (torch.randn(64, 1024),)),
         "streamed_rows_peeled": (lambda x: x - x.amax(-1, keepdim=True), lambda: (torch.randn(64, 1000),)),
         "middle_axis_mean": (lambda x: (x.mean(1), x + 1), lambda: (torch.randn(8, 64, 300),))}
PLANNED = ("reduction loop", "sibling loop", "column blocks", "streamed lines", "streamed rows", "exp lanes",
           "outer loops")


def _graphs(tmp_path, name: str) -> list[pathlib.Path]:
    """The debug folders of every graph the golden case compiles (static sizes: one plan per kernel)."""
    old = config.debug, config.debug_dir_root, config.graph_cache
    config.debug, config.debug_dir_root, config.graph_cache = True, str(tmp_path), False
    try:
        torch.manual_seed(0)
        torch._dynamo.reset()
        if name in EXTRA:
            fn, inputs = EXTRA[name]
            torch.compile(fn, backend="lens")(*inputs())
        elif name == "mlp_training_step":
            model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64),
                                        torch.nn.Linear(64, 8))
            torch.compile(model, backend="lens")(torch.randn(16, 32)).sum().backward()
        else:
            fn, inputs = cases.CASES[name]
            torch.compile(fn, backend="lens")(*inputs())
    finally:
        config.debug, config.debug_dir_root, config.graph_cache = old
    return sorted(tmp_path.glob("run_*/lens/graph_*"))


def kernel_texts(graph: pathlib.Path) -> dict[str, list[str]]:
    """Each kernel's C++ lines (stripped) in the graph's output_code.py, by name."""
    source = (graph / "output_code.py").read_text().split("cpp_source = r'''", 1)[1].split("'''", 1)[0]
    out, name = {}, None
    for line in source.splitlines():
        head = re.match(r'extern "C" void (\w+)\(', line)
        if head:
            name, out[head.group(1)] = head.group(1), []
        elif name is not None and line == "}":
            name = None
        elif name is not None:
            out[name].append(line.strip())
    return out


def _has(lines: list[str], pattern: str) -> bool:
    return any(re.search(pattern, line) for line in lines)


def printed_as_decided(pass_name: str, choice: str, lines: list[str]) -> list[str]:
    """The patterns of the decision's C++ that the kernel's lines lack ([] when every one is there)."""
    want: list[str] = []
    if pass_name in ("reduction loop", "sibling loop"):
        simd = re.search(r"omp simd reduction\((\S+):(\w+)\)", choice)
        if simd:
            want.append(rf"^#pragma omp simd reduction\({re.escape(simd.group(1))}:{simd.group(2)}\)$")
        lanes = re.match(r"(\d+) partials in (\w+)", choice) or re.search(r"of (\d+) lanes(?: up to \d+)? into (\w+)",
                                                                        choice)
        if lanes:
            want.append(rf"^alignas\(64\) \w+ {lanes.group(2)}\[{lanes.group(1)}\];$")
        if m := re.search(r"a scalar tail from (\d+)", choice):
            want.append(rf"^for \(int64_t \w+ = {m.group(1)}; ")
        if "NaN noticed by sum lanes" in choice:
            want.append(rf"^alignas\(64\) \w+ {lanes.group(2).removesuffix('_lanes')}_sum\[")
        if "a block of a line at a time" in choice or "asking for the next row's lines" in choice:
            want.append(r"__builtin_prefetch\(")
        if m := re.search(r"by blocks of (\d+) lanes up to (\d+)", choice):
            want.append(rf"^for \(int64_t \w+_base = 0; \w+_base < {m.group(2)}; \w+_base \+= {m.group(1)}\)$")
        if "then a tail block" in choice:
            want.append(rf"^const int64_t \w+_base = {m.group(2)};$")
        if m := re.match(r"a scalar loop into (\w+)", choice):
            return [f"no simd reduction into {m.group(1)}"] if _has(lines, rf"reduction\(\S+:{m.group(1)}\)") else []
    elif pass_name == "column blocks":
        if m := re.match(r"blocks of (\d+) outputs", choice):
            want.append(rf"^for \(int64_t \w+_base = 0; \w+_base < \d+; \w+_base \+= {m.group(1)}\)$")
        if m := re.search(r"in each of (\S+) outer indices", choice):
            want += [rf"^for \(int64_t (\w+) = 0; \1 < {s}; \1\+\+\)$" for s in m.group(1).split("×")]
            if "per thread" in choice:
                want.append(rf"^#pragma omp parallel for collapse\({len(m.group(1).split('×')) + 1}\)$")
        if m := re.search(r"chunks of (\d+) rows", choice):
            want.append(rf"lens_first \+= {m.group(1)}\)$")
        kept = re.search(r"partials \((.*)\) combined", choice)
        for dtype in re.findall(r"\w+ in (\w+)", kept.group(1) if kept else ""):  # each thread's partials so kept
            want.append(rf"^{CTYPES[getattr(torch, dtype)]}\* __restrict__ acc\d+_mine = ")
    elif pass_name == "streamed lines":
        m = re.search(r"blocks of (\d+) lanes up to (\d+)", choice)
        want.append(rf"^for \(int64_t \w+_base = 0; \w+_base < {m.group(2)}; \w+_base \+= {m.group(1)}\)$")
        if "plain tail" in choice:
            want.append(rf"^for \(int64_t \w+ = {m.group(2)}; ")
    elif pass_name == "streamed rows":
        if m := re.search(r"by lines of (\d+)(?: in blocks of (\d+) lanes)? up to (\d+)", choice):
            step = m.group(2) or m.group(1)
            want.append(rf"^for \(int64_t \w+_base = 0; \w+_base < {m.group(3)}; \w+_base \+= {step}\)$")
        if m := re.search(r"by lines of (\d+) after a plain head", choice):
            want += [r"= lens_line_head\(", rf"/ {m.group(1)} \* {m.group(1)};$"]
        if "lines of" in choice:
            want.append(r"^lens_stream_line\(")
    elif pass_name == "exp lanes":
        lanes = re.search(r"lens_exp_lanes<(\d+)>", choice).group(1)
        want.append(rf"lens_exp_lanes<{lanes}>\(")
    elif pass_name == "outer loops":
        loops, _, region = choice.partition(" in #pragma")
        expected = ([f"#pragma{region}"] if region else []) + [p for p in loops.split(" | ") if p != "plain"]
        at = 0
        for pragma in expected:  # in this order
            found = next((i for i in range(at, len(lines)) if lines[i] == pragma), None)
            if found is None:
                return [pragma]
            at = found + 1
    return [p for p in want if not _has(lines, p)]


@pytest.mark.parametrize("name", sorted(set(cases.CASES) | {"mlp_training_step", *EXTRA}))
def test_kernel_plans_json_records_the_loops_each_golden_kernel_prints(tmp_path, monkeypatch, name):
    if name in EXTRA:
        monkeypatch.setattr(config.cpp, "streaming_store_min_bytes", 0)
    seen: dict[str, int] = {}
    for graph in _graphs(tmp_path, name):
        texts = kernel_texts(graph)
        for plan in kernel_plans(graph).kernels:
            assert not plan.size_variant
            lines = texts[plan.kernel]
            planned_ops = set()
            for d in plan.decisions:
                if d.pass_name not in PLANNED:
                    continue
                seen[d.pass_name] = seen.get(d.pass_name, 0) + 1
                missing = printed_as_decided(d.pass_name, d.choice, lines)
                assert not missing, f"{plan.kernel}: {d.pass_name} ({d.subject}) '{d.choice}' prints no {missing}"
                planned_ops |= set(re.findall(r"omp simd reduction\((\S+:\w+)\)", d.choice))
            printed_ops = {m.group(1) for line in lines if (m := re.match(r"#pragma omp simd reduction\((\S+)\)$", line))}
            assert printed_ops == planned_ops, plan.kernel  # every simd reduction printed was planned, and no other
            cut = any(d.pass_name == "exp lanes" for d in plan.decisions)
            assert cut == _has(lines, r"lens_exp_lanes<"), plan.kernel
            reductions = {d.subject for d in plan.decisions if d.pass_name == "vectorize"}
            assert reductions <= {d.subject for d in plan.decisions if d.pass_name == "reduction loop"}
    assert seen.get("outer loops"), seen
    expected = {"softmax": {"reduction loop", "sibling loop", "exp lanes"}, "reductions": {"reduction loop",
                "column blocks"}, "streamed_flat": {"streamed lines"}, "gelu_layer_norm": {"reduction loop"},
                "masked_softmax": {"exp lanes", "sibling loop"}, "mlp_training_step": {"column blocks"},
                "streamed_rows": {"streamed rows"}, "streamed_rows_peeled": {"streamed rows"},
                "middle_axis_mean": {"column blocks"}}
    assert expected.get(name, set()) <= set(seen), seen


def test_a_decision_the_kernel_does_not_print_is_caught():
    """The matcher itself: a planned operator, lane count or pragma the C++ lacks is reported."""
    lines = ["#pragma omp simd reduction(+:acc_out_ptr0)", "alignas(64) float buf0_local_lanes[64];"]
    assert printed_as_decided("reduction loop", "omp simd reduction(+:acc_out_ptr0)", lines) == []
    assert printed_as_decided("reduction loop", "omp simd reduction(*:acc_out_ptr0)", lines)
    assert printed_as_decided("reduction loop", "64 partials in buf0_local_lanes (4 registers of 16 lanes)", lines) == []
    assert printed_as_decided("reduction loop", "32 partials in buf0_local_lanes (2 registers of 16 lanes)", lines)
    assert printed_as_decided("reduction loop", "a scalar loop into acc_out_ptr0", lines)
    assert printed_as_decided("outer loops", "#pragma omp parallel for | plain", lines) == ["#pragma omp parallel for"]
    column = ["#pragma omp parallel for collapse(2)", "for (int64_t x0 = 0; x0 < 16; x0++)",
              "for (int64_t x1_base = 0; x1_base < 512; x1_base += 256)"]
    blocks = "blocks of 256 outputs in each of 16 outer indices, an outer index and block per thread"
    assert printed_as_decided("column blocks", blocks, column) == []
    assert printed_as_decided("column blocks", blocks, column[1:]) == [r"^#pragma omp parallel for collapse\(2\)$"]
    assert printed_as_decided("column blocks", blocks.replace("16 outer", "8 outer"), column)
    rows = ["for (int64_t x1_base = 0; x1_base < 1024; x1_base += 64)", "lens_stream_line(out_ptr0 + 1024*x0 + x1_base);"]
    assert printed_as_decided("streamed rows", "its rows by lines of 16 in blocks of 64 lanes up to 1024", rows) == []
    assert printed_as_decided("streamed rows", "its rows by lines of 16 up to 1024", rows)
