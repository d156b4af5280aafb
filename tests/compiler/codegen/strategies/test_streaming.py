"""Large graph outputs no step reads are written with streaming stores in whole lines
(compiler/codegen/strategies/streaming.py); results stay eager's, whatever the output's alignment or tail."""
import ctypes
import re
import subprocess

import pytest
import sympy
import torch

from compiler import config
from compiler.codegen.cpp import render_kernel
from compiler.codegen.cpp_ops import PRELUDE
from compiler.codegen.strategies.streaming import line_aligned
from compiler.cpp_text.math_prelude import PRELUDE_END
from compiler.ir.nodes import ComputedBuffer, Constant, Layout, Load, Op, index_vars
from compiler.machine.build import build_shared_library
from compiler.machine.build import isa_flags as build_isa_flags
from compiler.scheduler import FusedKernel
from tests.compiler.conftest import assert_same, compile_with_debug, kernel_plans, only_plan


def kernels(tmp_path, fn, *args) -> str:
    out, graph = compile_with_debug(tmp_path, fn, *args)
    return (graph / "output_code.py").read_text().split(PRELUDE_END, 1)[1]


def test_softmax_output_rows_stream_and_each_thread_fences(tmp_path, stream_everything):
    x = torch.randn(64, 1024)
    code = kernels(tmp_path, lambda x: torch.softmax(x, -1), x)
    assert only_plan(last_graph(tmp_path)).streamed == ("buf3",)  # the output; the locals store plainly
    assert "lens_stream_line(out_ptr0 + " in code
    assert code.index("#pragma omp parallel\n") < code.index("#pragma omp for nowait") < code.index("lens_sfence();")
    assert_same(lambda x: torch.softmax(x, -1), x)


def test_flat_kernels_stream_by_blocks_of_one_line(tmp_path, stream_everything):
    a, b = torch.randn(64, 512), torch.randn(1, 512)
    code = kernels(tmp_path, lambda a, b: (a + b) * 2, a, b)
    assert "for (int64_t x1_base = 0; x1_base < 512; x1_base += 16)" in code
    assert "lens_stream_line(out_ptr0 + 512*x0 + x1_base, buf" in code
    code = kernels(tmp_path, lambda a: a * 2, torch.randn(4096, dtype=torch.float64))
    assert "#pragma omp for nowait\n" in code and "x0_base += 8)" in code


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                                   torch.int32, torch.uint8, torch.bool])
@pytest.mark.parametrize("shape", [(8, 1024), (40, 160), (4096,), (2, 3, 1024)])  # all run on threads
def test_streamed_outputs_equal_eager(stream_everything, dtype, shape, monkeypatch):
    monkeypatch.setattr(config, "emulate_precision_casts", True)  # half dtypes rounded after each op, as eager
    x = (torch.randn(shape) * 5).to(dtype)
    assert_same(lambda x: (x * 3 + 1) if dtype != torch.bool else ~x, x)
    if dtype.is_floating_point:
        assert_same(lambda x: torch.softmax(x, -1), x, atol=1e-3 if dtype.itemsize == 2 else 1e-5,
                    rtol=1e-2 if dtype.itemsize == 2 else 1.3e-6)


def test_small_outputs_intermediates_and_outputs_read_again_are_stored_plainly(tmp_path, monkeypatch):
    monkeypatch.setattr(config.cpp, "streaming_store_min_bytes", 1 << 20)
    x = torch.randn(64, 1024)  # 256 KiB: under the threshold
    assert "lens_stream_line(out" not in kernels(tmp_path, lambda x: x * 2, x)
    assert "under config.cpp.streaming_store_min_bytes" in _streaming_reason(tmp_path, "buf0")
    monkeypatch.setattr(config.cpp, "streaming_store_min_bytes", 0)
    w = torch.randn(1024, 8)
    code = kernels(tmp_path, lambda x, w: (x * 2) @ w, x, w)  # x * 2 is read back by the mm
    assert "lens_stream_line(out" not in code
    assert _streaming_reason(tmp_path, "buf0") == "not a graph output, or read again after the kernel"

    def exp_and_sum(x):
        e = torch.exp(x)
        return e, e.sum(-1)  # e: read again by the sum
    assert "lens_stream_line(out" not in kernels(tmp_path, exp_and_sum, x)
    assert _streaming_reason(tmp_path, "buf0") == "not a graph output, or read again after the kernel"
    monkeypatch.setattr(config.cpp, "streaming_stores", False)
    assert "lens_stream_line(out" not in kernels(tmp_path, lambda x: x * 2, x)


def last_graph(tmp_path):
    return sorted(tmp_path.glob("run_*/lens/graph_*"), key=lambda p: int(p.name.split("_")[1]))[-1]


def _streaming_reason(tmp_path, node: str) -> str:
    """Why the streaming pass left `node` of the last graph's kernels to plain stores (its kernel_plans.json)."""
    plans = kernel_plans(last_graph(tmp_path)).kernels
    return next(d.reason for p in plans for d in p.decisions if d.pass_name == "streaming" and d.subject == node)


def test_rows_that_do_not_start_on_a_line_peel_their_head_and_stream_whole_lines(tmp_path, stream_everything):
    x = torch.randn(64, 1000)  # 4000-byte rows: every other one starts mid-line
    code = kernels(tmp_path, lambda x: torch.softmax(x, -1), x)
    assert "const int64_t x3_1_head = lens_line_head(out_ptr0 + 1000*x0, 1000);" in code
    assert "lens_stream_line(out_ptr0 + 1000*x0 + x3_1_base, buf3_line);" in code and "lens_sfence" in code
    assert_same(lambda x: torch.softmax(x, -1), x)
    # a lone loop whose length is no whole number of lines keeps one loop (no tail outside the threads)
    code = kernels(tmp_path, lambda x: x * 2, torch.randn(100003))
    assert "lens_stream_line(out" not in code


def test_line_aligned():
    x0, x1, x2 = sympy.symbols("x0 x1 x2", integer=True, nonnegative=True)
    assert line_aligned(1024 * x0 + x1, x1, 16)
    assert line_aligned(32 * x0 + 2048 * x2 + x1 + 64, x1, 16)
    assert not line_aligned(1000 * x0 + x1, x1, 16)  # rows start mid-line
    assert not line_aligned(1024 * x0 + 2 * x1, x1, 16)  # gaps
    assert not line_aligned(1024 * x0 + x1 + 8, x1, 16)
    assert not line_aligned(1024 * x1 + x0, x1, 16)  # not the contiguous dim
    assert not line_aligned(sympy.floor(x0 / 2) * 16 + x1, x1, 16)
    assert line_aligned(1000 * x0 + x1 + 3, x1, None)  # None: rows may start anywhere in a line
    assert not line_aligned(1000 * x0 + 2 * x1, x1, None) and not line_aligned(1024 * x1 + x0, x1, None)


def _padded_kernel(with_row_pass: bool, row_stride: int = 1024) -> FusedKernel:
    """out[i, j] = in[i, j] * 2 (minus the row's sum) for (64, 1000) rows stored 1024 apart: every row starts
    on a line and ends with a 1000 % 16 = 8-element tail."""
    f32 = torch.float32
    size, vars_ = (64, 1000), index_vars(2)
    load = Load(f32, "mul", "in0", tuple(vars_))
    body = Op(f32, "mul", "mul", (load, Constant(f32, "mul", 2.0)))
    nodes = []
    if with_row_pass:
        r = index_vars(1, "r")
        rows = ComputedBuffer("rowsum", f32, Layout((64, 1), (1, 1)), Load(f32, "sum", "in0", (vars_[0], r[0])),
                              vars_, ["sum"], "sum", "sum", (1000,), r)
        nodes.append(rows)
        body = Op(f32, "sub", "sub", (body, Load(f32, "sub", "rowsum", (vars_[0], sympy.Integer(0)))))
    nodes.append(ComputedBuffer("out", f32, Layout(size, (row_stride, 1)), body, vars_, ["mul"], "mul"))
    return FusedKernel(nodes, (64,) if with_row_pass else size, with_row_pass, name="padded",
                       origins=["mul"], local={"rowsum"} if with_row_pass else set(), unread_outputs={"out"})


@pytest.mark.parametrize("with_row_pass", [False, True])
@pytest.mark.parametrize("offset", [0, 4])  # elements: 16 bytes off a line -> plain stores
def test_tails_and_unaligned_outputs(stream_everything, with_row_pass, offset):
    k = _padded_kernel(with_row_pass)
    layouts = {"in0": (torch.float32, Layout((64, 1000), (1000, 1)))}
    layouts.update({n.name: (n.dtype, n.layout) for n in k.nodes})
    rk = render_kernel(k, layouts, {})
    body = "\n".join(text for text, _ in rk.lines)
    assert re.search(r"lens_stream_line\(out_ptr0 \+ 1024\*x0 \+ x1(_1)?_base, out_line\);", body)
    assert re.search(r"for \(int64_t x1(_1)? = 992; x1(_1)? < 1000; ", body)  # the tail
    source = PRELUDE + "\n" + body
    lib = ctypes.CDLL(build_shared_library(source, "streaming_test"))
    x = torch.randn(64, 1000)
    storage = torch.full((offset + 64 * 1024,), float("nan"))
    out = storage[offset:].as_strided((64, 1000), (1024, 1))
    getattr(lib, k.name)(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(out.data_ptr()))
    expected = x * 2 - (x.sum(-1, keepdim=True) if with_row_pass else 0)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-4)
    gaps = storage[offset:].view(64, 1024)[:, 1000:]
    assert gaps.isnan().all()  # nothing written between the rows


@pytest.mark.parametrize("offset", [0, 3, 8, 15])
@pytest.mark.parametrize("row_stride", [1000, 1001, 1007])  # rows starting anywhere in a line
def test_rows_starting_mid_line_write_every_element_and_nothing_else(stream_everything, offset, row_stride):
    k = _padded_kernel(True, row_stride)
    layouts = {"in0": (torch.float32, Layout((64, 1000), (1000, 1)))}
    layouts.update({n.name: (n.dtype, n.layout) for n in k.nodes})
    body = "\n".join(text for text, _ in render_kernel(k, layouts, {}).lines)
    assert "lens_line_head(out_ptr0 + " in body and "lens_stream_line(out_ptr0 + " in body
    lib = ctypes.CDLL(build_shared_library(PRELUDE + "\n" + body, "streaming_test"))
    x = torch.randn(64, 1000)
    storage = torch.full((offset + 64 * row_stride + 16,), float("nan"))
    out = storage[offset:].as_strided((64, 1000), (row_stride, 1))
    getattr(lib, k.name)(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(out.data_ptr()))
    torch.testing.assert_close(out, x * 2 - x.sum(-1, keepdim=True), rtol=1e-5, atol=1e-4)
    assert storage[:offset].isnan().all() and storage[offset + 63 * row_stride + 1000:].isnan().all()
    if row_stride > 1000:
        assert storage[offset:offset + 63 * row_stride].view(63, row_stride)[:, 1000:].isnan().all()


@pytest.mark.parametrize("isa", [[], ["-mno-avx512f"], ["-mno-avx"]])  # the AVX-512, AVX and SSE2 stores
def test_stream_line_on_each_instruction_set(tmp_path, isa):
    import subprocess
    src = tmp_path / "copy.cpp"
    src.write_text(PRELUDE + 'extern "C" void copy_lines(const float* in, float* out, int64_t lines) {\n'
                   "  for (int64_t i = 0; i < lines; i++) lens_stream_line(out + 16 * i, in + 16 * i);\n"
                   "  lens_sfence();\n}\n")
    so = tmp_path / "copy.so"
    flags = [f for f in config.cpp.flags if f not in ("-shared", "-fPIC")]
    subprocess.run([config.cpp.cxx, *flags, *isa, "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    lib = ctypes.CDLL(str(so))
    x = torch.randn(64 * 16)
    for offset in (0, 1, 4, 8):  # 64-byte aligned, then 4, 16 and 32 bytes off
        storage = torch.zeros(64 * 16 + 16)
        out = storage[offset:offset + 64 * 16]
        lib.copy_lines(ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(out.data_ptr()), ctypes.c_int64(64))
        assert torch.equal(out, x)


# -- narrow integer inputs: blocks of lines that fill a vector of them (block_lanes) ---------------------------------
def _dequantize(q, scale, zero):
    return torch.nn.functional.gelu((q.float() - zero) * scale)


def _quantized(dtype, rows, cols):
    low, high = (-128, 128) if dtype == torch.int8 else (0, 256)
    return (torch.randint(low, high, (rows, cols), dtype=dtype), torch.rand(rows, 1) / 64,
            torch.randint(-4, 4, (rows, 1)).float())


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8])
@pytest.mark.parametrize("cols, var, size, lanes, tail", [(1024, "x1", 1024, 64, False), (1040, "x1", 1040, 64, True),
                                                      (48, "x1", 48, 16, False)])
def test_int8_inputs_stream_by_blocks_of_64_lanes(tmp_path, stream_everything, dtype, cols, var, size, lanes, tail):
    """g++ sizes a loop's vectors by its narrowest type: a block of 16 int8 lanes ran the float side in 128-bit
    registers; a block of 64 fills one 512-bit vector of int8 and four of float (rows of 48, shorter than a block:
    lines)."""
    args = _quantized(dtype, 129, cols)
    code = kernels(tmp_path, _dequantize, *args)
    main = size - size % lanes
    assert f"for (int64_t {var}_base = 0; {var}_base < {main}; {var}_base += {lanes})" in code
    assert f"alignas(64) float buf0_line[{lanes}];" in code
    assert code.count("lens_stream_line(out_ptr0 + ") == lanes // 16
    assert (f"for (int64_t {var} = {main}; {var} < {size}; {var}++)" in code) == tail
    (blocks,) = [d.choice for d in only_plan(last_graph(tmp_path)).decisions if d.pass_name == "streamed lines"]
    assert blocks == f"the last outer loop by blocks of {lanes} lanes up to {main}" + (", then a plain tail" * tail)
    assert_same(_dequantize, *args, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("cols, blocks", [(1024, "in blocks of 64 lanes up to 1024"),
                                          (1104, "in blocks of 64 lanes up to 1088, a plain tail"),
                                          (48, "up to 48")])  # (a row shorter than a block: lines)
def test_rows_over_int8_stream_by_blocks_of_64_lanes(tmp_path, stream_everything, cols, blocks):
    fn = lambda q: q.float() - q.float().amax(-1, keepdim=True)  # noqa: E731
    q = torch.randint(-128, 128, (129, cols), dtype=torch.int8)
    kernels(tmp_path, fn, q)
    rows = [d.choice for d in only_plan(last_graph(tmp_path)).decisions if d.pass_name == "streamed rows"]
    assert rows == [f"its rows by lines of 16 {blocks}"]
    assert_same(fn, q)


def test_int8_into_bfloat16_streams_by_blocks_of_64_lanes(tmp_path, stream_everything):
    fn = lambda q, s: (q.float() * s).to(torch.bfloat16)  # noqa: E731
    q, s = torch.randint(-128, 128, (9, 1024), dtype=torch.int8), torch.rand(9, 1)
    code = kernels(tmp_path, fn, q, s)
    assert "x1_base += 64)" in code and code.count("lens_stream_line(out_ptr0 + ") == 2  # two lines of 32 bf16
    assert_same(fn, q, s)


@pytest.mark.parametrize("fn, args", [
    (lambda x, m: x.masked_fill(m, 0.0) * 2, (torch.randn(8, 1024), torch.rand(8, 1024) > 0.5)),
    (lambda x: x.float() * 2, (torch.randn(8, 1024).to(torch.bfloat16),)),
    (lambda x: x.float() * 2, (torch.randn(8, 1024).to(torch.float16),)),
], ids=["bool_mask", "bfloat16", "float16"])
def test_masks_and_half_inputs_stream_by_lines(tmp_path, stream_everything, fn, args):
    """(measured the same or slower by blocks: streaming.block_lanes)"""
    code = kernels(tmp_path, fn, *args)
    assert "x1_base += 16)" in code and "_line[16];" in code
    assert_same(fn, *args)


@pytest.mark.skipif(not build_isa_flags(), reason="512-bit vectors on AVX-512 machines with g++ only")
def test_the_int8_block_converts_in_512_bit_registers(tmp_path, stream_everything):
    _, graph = compile_with_debug(tmp_path, _dequantize, *_quantized(torch.int8, 64, 1024))
    source = (graph / "output_code.py").read_text().split("cpp_source = r'''", 1)[1].split("'''", 1)[0]
    so = build_shared_library(source)  # a cache hit: the library the run above loaded
    asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", so], capture_output=True, text=True, check=True)
    kernel = asm.stdout.split("_omp_fn.0>:", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"vcvtdq2ps %zmm", kernel) and not re.search(r"vcvtdq2ps %[xy]mm", kernel), kernel
