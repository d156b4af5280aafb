"""parsers/torch_trace/dynamo_guards.py on guard trees and recompile reasons as torch 2.13's Dynamo logs them (a function
`scaled(x, n)` compiled for n=2, called with n=3, then with a float64 x)."""
from __future__ import annotations

from lsp_server.parsers.torch_trace.dynamo_guards import DynamoGuard, parse_guard_tree, quoted_guard
from lsp_server.parsers.torch_trace.payloads import FailedGuard, parse_recompile_reasons

TREE = """
TREE_GUARD_MANAGER:
+- RootGuardManager
| +- LAMBDA_GUARD: torch._functorch.aot_autograd.utils.top_saved_tensors_hooks ids == None  # _dynamo/output_graph.py:1135 in init_ambient_guards
| +- TORCH_FUNCTION_MODE_STACK: ___check_torch_function_mode_stack()
| +- GuardManager: source=L['n'], accessed_by=FrameLocalsGuardAccessor(key='n', framelocals_idx=1), type=<class 'int'>, tag_safe=(False, False)
| | +- EQUALS_MATCH: L['n'] == 2                                                   # return x * n + 1  # mp/guards_probe/prog.py:4 in scaled
| +- GuardManager: source=L['x'], accessed_by=FrameLocalsGuardAccessor(key='x', framelocals_idx=0), type=<class 'torch.Tensor'>, tag_safe=(False, False)
| | +- TENSOR_MATCH: check_tensor(L['x'], Tensor, DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, AutogradCPU), torch.float32, device=None, requires_grad=False, size=[8], stride=[1])  # return x * n + 1  # mp/guards_probe/prog.py:4 in scaled
| | +- DIMENSION_DYNAMIC_MARKING_GUARD: hasattr(L['x'], '_dynamo_dynamic_indices') == False           # return x * n + 1  # mp/guards_probe/prog.py:4 in scaled
| | +- NO_TENSOR_ALIASING

Guard latency = 32.21 us
"""
REASONS_LINES = ("0/0: n == 2                                                   # return x * n + 1  # "
                 "mp/guards_probe/prog.py:4 in scaled\nUser stack trace:\n  File \"/tmp/guards_probe/prog.py\", line 4,"
                 " in scaled\n    return x * n + 1")
REASONS_JSON = ('[\n"0/1: tensor \'x\' dtype mismatch. expected Float, actual Double",\n"0/0: n == 2      # return x * n '
                '+ 1  # mp/guards_probe/prog.py:4 in scaled\\nUser stack trace:\\n  File \\"/tmp/guards_probe/prog.py\\"'
                ', line 4, in scaled\\n    return x * n + 1"\n]')


def test_the_tree_gives_each_guard_with_its_kind_code_and_user_line():
    guards = parse_guard_tree(TREE)
    assert [g.kind for g in guards] == ["LAMBDA_GUARD", "TORCH_FUNCTION_MODE_STACK", "EQUALS_MATCH", "TENSOR_MATCH",
                                        "DIMENSION_DYNAMIC_MARKING_GUARD", "NO_TENSOR_ALIASING"]
    assert guards[2] == DynamoGuard("EQUALS_MATCH", "L['n'] == 2", 4, "mp/guards_probe/prog.py")
    assert guards[0].line is None and guards[0].code.endswith("ids == None")  # an ambient guard: no user line
    assert guards[3].code.endswith("size=[8], stride=[1])") and guards[5].code == ""
    assert guards[2].in_file("/tmp/guards_probe/prog.py") and guards[2].in_file("/elsewhere/prog.py")
    assert not guards[2].in_file("/tmp/guards_probe/other.py") and not guards[0].in_file("/tmp/guards_probe/prog.py")


def test_a_recompile_reason_names_the_guard_that_failed():
    guards = parse_guard_tree(TREE)
    assert quoted_guard(guards, "n == 2") == 2
    assert quoted_guard(guards, "tensor 'x' dtype mismatch. expected Float, actual Double") == 3
    assert quoted_guard(guards, "tensor 'y' size mismatch at index 0. expected 8, actual 9") is None
    assert quoted_guard(guards, "n == 5") is None


def test_recompile_reasons_drop_dynamos_comment_and_user_stack():
    assert parse_recompile_reasons(REASONS_LINES) == [FailedGuard("0/0", "n == 2")]
    assert parse_recompile_reasons(REASONS_JSON) == [
        FailedGuard("0/1", "tensor 'x' dtype mismatch. expected Float, actual Double"), FailedGuard("0/0", "n == 2")]
    assert parse_recompile_reasons("0/0: a\n0/1: b") == [FailedGuard("0/0", "a"), FailedGuard("0/1", "b")]
