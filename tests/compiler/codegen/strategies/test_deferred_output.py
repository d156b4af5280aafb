"""A row kernel's output pass runs one row late, inside the next row's compute pass
(compiler/codegen/strategies/deferred_output.py); results stay eager's whatever the rows each thread gets."""
import pytest
import torch

from compiler import config
from compiler.cpp_text.math_prelude import PRELUDE_END
from tests.compiler.conftest import assert_same, compile_with_debug, only_plan

DEFERRED = "const int64_t x0 = lens_prev_row;"


def kernels(tmp_path, fn, *args) -> str:
    out, graph = compile_with_debug(tmp_path, fn, *args)
    expected = fn(*args)
    torch.testing.assert_close(out, expected, equal_nan=True, rtol=1.3e-6, atol=1e-5)
    return (graph / "output_code.py").read_text().split(PRELUDE_END, 1)[1]


def test_softmax_writes_the_previous_rows_line_in_each_block_of_its_exp_pass(tmp_path, stream_everything):
    code = kernels(tmp_path, lambda x: torch.softmax(x, -1), torch.randn(64, 1024))
    (graph,) = tmp_path.glob("run_*/lens/graph_*")
    plan = only_plan(graph)  # planned: the output pass (buf3) a row late, in the pass prefetching by lines (buf1)
    assert plan.deferred == "buf3" and plan.row_prefetch == "buf1" and "buf3" in plan.streamed
    assert code.count(DEFERRED) == 2  # in the exp pass, and the thread's last row after its loop
    assert "alignas(64) float buf1_local_slots[2][1024];" in code and "float buf2_local_prev = 0;" in code
    loop = code[code.index("#pragma omp for nowait"):code.index("lens_sfence();")]
    exp, deferred, fold = loop.index("lens_exp_lanes<16>("), loop.index(DEFERRED), loop.index("buf2_local = buf2_local + ")
    assert exp < deferred < fold  # inside the block loop of the exp pass
    block = loop[deferred:fold]
    assert "buf1_local_prev[x1_1]" in block and "/ buf2_local_prev" in block
    assert "lens_stream_line(out_ptr0 + 1024*x0 + x1_1_base, " in block  # its line, in the exp pass's block
    assert "buf2_local_prev = buf2_local;" in loop and "lens_slot ^= 1;" in loop
    tail = code[code.index("lens_sfence();") - 1200:code.index("lens_sfence();")]
    assert DEFERRED in tail and "buf1_local_slots[lens_slot ^ 1]" in tail


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("rows", [2, 3, 7, 64])
def test_every_row_is_written_whatever_rows_a_thread_gets(tmp_path, stream_everything, monkeypatch, threads,
                                                          rows):
    monkeypatch.setattr(config.cpp, "min_chunk_size", 1)  # threads even for two rows
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        x = torch.randn(rows, 512) * 4
        x[rows // 2, 7] = float("nan")  # a row of NaN results
        mask = torch.zeros(rows, 512)
        mask[-1] = float("-inf")  # a fully masked row: NaN, as eager gives
        assert DEFERRED in kernels(tmp_path, lambda x: torch.softmax(x, -1), x)
        assert_same(lambda x, m: torch.softmax(x + m, -1), x, mask)
        assert_same(lambda x: torch.log_softmax(x, -1), x)
    finally:
        torch.set_num_threads(old)


def test_output_passes_that_read_an_input_row_again_are_not_deferred(tmp_path, stream_everything):
    ln = torch.nn.LayerNorm(512)
    with torch.no_grad():
        ln.weight.normal_(), ln.bias.normal_()
        code = kernels(tmp_path, ln, torch.randn(32, 512))
    assert "lens_prev_row" not in code and "lens_stream_line(out_ptr0" in code


def test_off_switch_and_kernels_without_a_prefetching_pass(tmp_path, stream_everything, monkeypatch):
    assert "lens_prev_row" not in kernels(tmp_path, lambda x: torch.softmax(x, -1), torch.randn(16, 1000))
    assert "lens_prev_row" not in kernels(tmp_path, lambda x: x.exp() * 2, torch.randn(64, 1024))
    monkeypatch.setattr(config.cpp, "pipeline_rows", False)
    code = kernels(tmp_path, lambda x: torch.softmax(x, -1), torch.randn(64, 1024))
    assert "lens_prev_row" not in code and "lens_stream_line(out_ptr0" in code
