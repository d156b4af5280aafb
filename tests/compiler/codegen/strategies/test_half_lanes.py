"""float16 conversions of lane loops done by blocks (compiler/codegen/strategies/half_lanes.py): the same bits as the per-value
conversions on real kernels (pointwise, softmax, layer_norm, a dynamic size), eager's results, and only where every
lane runs the statement at an index that steps by one element."""
import pytest
import torch

from compiler import config
from compiler.codegen.strategies import half_lanes
from compiler.cpp_text.math_prelude import PRELUDE_END
from tests.compiler.test_dynamic import check_dynamic

W, B = torch.randn(1024, dtype=torch.float16), torch.randn(1024, dtype=torch.float16)
PROGRAMS = {
    "pointwise": (lambda a, b, c: (a + b) * c + 1, 3),
    "softmax": (lambda x: torch.softmax(x, -1), 1),
    "layer_norm": (lambda x: torch.nn.functional.layer_norm(x, (1024,), W, B), 1),
    "gelu_then_float": (lambda x: torch.nn.functional.gelu(x).float() * 2, 1),
    "in_place_gelu": (lambda a, b: torch.nn.functional.gelu(a + b), 2),  # its output over a + b's buffer
}


def _compile(fn, args, on: bool, monkeypatch):
    monkeypatch.setattr(config.cpp, "half_lanes", on)
    torch._dynamo.reset()
    from compiler import pipeline
    mark = len(pipeline.COMPILED)
    out = torch.compile(fn, backend="lens")(*args)
    code = "".join(g.code.text.split(PRELUDE_END, 1)[1] for g in pipeline.COMPILED[mark:])
    return out, code


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("rows", [4096, 33])
def test_block_conversions_give_the_per_value_conversions_bits_and_eagers_results(name, rows, monkeypatch):
    fn, n = PROGRAMS[name]
    torch.manual_seed(rows)
    args = [torch.randn(rows, 1024, dtype=torch.float16) * 30 for _ in range(n)]
    # (+-inf too, but eager's gelu(inf) is nan or inf by size; 65504 but where eager's rounding after each op
    # overflows a sum that lens's one rounding keeps finite)
    special = [float("nan"), 6e-8, -6e-8, 2000 if n > 1 else 65504, 1e-5, 0]
    args[0][0, :8] = torch.tensor(special + ([0, 0] if "gelu" in name else [float("inf"), -float("inf")]))
    blocks, code = _compile(fn, args, True, monkeypatch)
    per_value, old_code = _compile(fn, args, False, monkeypatch)
    assert "lens_fp16_load_lanes<" in code and "lens_fp16_load_lanes<" not in old_code
    assert torch.equal(blocks.view(torch.int16) if blocks.dtype == torch.float16 else blocks.view(torch.int32),
                       per_value.view(torch.int16) if per_value.dtype == torch.float16 else per_value.view(torch.int32))
    expected = fn(*args)
    torch.testing.assert_close(blocks, expected, equal_nan=True, atol=2e-2 if name == "layer_norm" else 1e-3,
                               rtol=1e-2)


def test_a_dynamic_float16_softmax_converts_by_blocks_at_every_size():
    graph, = check_dynamic(lambda x: torch.softmax(x, -1), lambda n: (torch.randn(n, 1024, dtype=torch.float16),),
                           sizes=(64, 5, 300), atol=1e-3, rtol=1e-3)
    assert "lens_fp16_load_lanes<" in graph.code.text.split(PRELUDE_END, 1)[1]


def _loop(body: list[str], lanes: int = 32, var: str = "x1") -> list[tuple[str, list[str]]]:
    lines = ["        #pragma omp simd", f"        for (int64_t {var}_lane = 0; {var}_lane < {lanes}; {var}_lane++)",
             "        {", f"            int64_t {var} = {var}_base + {var}_lane;", *["            " + b for b in body],
             "        }"]
    return [(t, ["add"]) for t in lines]


def _texts(lines) -> list[str]:
    return [t.strip() for t, _ in lines]


def test_loads_and_stores_at_unit_steps_convert_before_and_after_the_loop_in_a_block_of_their_own():
    out = _texts(half_lanes.apply(_loop(["auto tmp0 = lens_fp16_to_float(in_ptr0[x1 + 1024*x0]);",
                                         "auto tmp1 = tmp0 * 2;", "buf0_line[x1_lane] = lens_float_to_fp16(tmp1);"])))
    assert out == ["{", "alignas(64) float tmp0_lanes[32];",
                   "lens_fp16_load_lanes<32>(in_ptr0 + (x1_base + 1024*x0), tmp0_lanes);",
                   "alignas(64) float buf0_line_lanes[32];", "#pragma omp simd",
                   "for (int64_t x1_lane = 0; x1_lane < 32; x1_lane++)", "{", "int64_t x1 = x1_base + x1_lane;",
                   "auto tmp0 = tmp0_lanes[x1_lane];", "auto tmp1 = tmp0 * 2;", "buf0_line_lanes[x1_lane] = tmp1;",
                   "}", "lens_fp16_store_lanes<32>(buf0_line + (0), buf0_line_lanes);", "}"]


def test_a_kernel_writing_in_place_reads_the_block_before_the_loop_and_writes_it_after():
    out = _texts(half_lanes.apply(_loop(["auto tmp0 = lens_fp16_to_float(in_out_ptr0[x1]);",
                                         "in_out_ptr0[x1] = lens_float_to_fp16(tmp0 * 2);"])))
    assert out[1:3] == ["alignas(64) float tmp0_lanes[32];", "lens_fp16_load_lanes<32>(in_out_ptr0 + (x1_base), tmp0_lanes);"]
    assert "in_out_ptr0_lanes[x1_lane] = tmp0 * 2;" in out
    assert out[-2] == "lens_fp16_store_lanes<32>(in_out_ptr0 + (x1_base), in_out_ptr0_lanes);"


@pytest.mark.parametrize("body", [
    ["auto tmp0 = lens_fp16_to_float(in_ptr0[2*x1]);"],  # every other element
    ["auto tmp0 = lens_fp16_to_float(in_ptr0[x1/2]);"],  # C++ integer division
    ["auto tmp0 = lens_fp16_to_float(in_ptr0[x0]);"],  # the same element in every lane
    ["int64_t y = x1 % 7;", "auto tmp0 = lens_fp16_to_float(in_ptr0[y + x1]);"],  # a value the loop computes
    ["if (x1 < 1000)", "{", "    auto tmp0 = lens_fp16_to_float(in_ptr0[x1]);", "}"],  # not every lane
    ["out_ptr0[x1] = lens_float_to_fp16(tmp9);", "auto tmp0 = out_ptr0[x1 + 1];"],  # a store read back
    # a store read back converted: the load must see this iteration's store, not the buffer before the loop
    ["out_ptr0[x1] = lens_float_to_fp16(tmp9);", "auto tmp0 = lens_fp16_to_float(out_ptr0[x1]);",
     "out_ptr1[x1] = tmp0;"],
])
def test_statements_not_run_for_every_lane_at_unit_steps_keep_their_per_value_conversions(body):
    lines = _loop(body)
    assert half_lanes.apply(lines) == lines


def test_lanes_not_a_multiple_of_sixteen_and_kernels_without_float16_are_left_alone(monkeypatch):
    odd = _loop(["auto tmp0 = lens_fp16_to_float(in_ptr0[x1]);"], lanes=24)
    assert half_lanes.apply(odd) == odd
    plain = _loop(["auto tmp0 = in_ptr0[x1];"])
    assert half_lanes.apply(plain) is plain
    monkeypatch.setattr(config.cpp, "half_lanes", False)
    on = _loop(["auto tmp0 = lens_fp16_to_float(in_ptr0[x1]);"])
    assert half_lanes.apply(on) is on


def test_a_float16_value_stored_then_read_back_as_float_in_one_loop_matches_eager():
    """A float16 activation kept for a later use and read back as float32 by the next statement of the same loop
    (a float16-autocast conv net's hardswish before a convolution computed in float32): the block load must not be
    hoisted above the store (it read the buffer's earlier contents: NaN from fresh memory)."""
    def fn(x, w):
        y = torch.nn.functional.hardswish(x.half().float() * 1.5).half()
        return torch.conv2d(y.float(), w), y
    torch._dynamo.reset()
    torch.manual_seed(0)
    x, w = torch.randn(1, 16, 8, 8).contiguous(memory_format=torch.channels_last), torch.randn(8, 16, 1, 1)
    for _ in range(3):  # (fresh buffers of the pool each call: stale contents differ)
        got = torch.compile(fn, backend="lens")(x, w)
        expected = fn(x, w)
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e, atol=1e-2, rtol=1e-2)
