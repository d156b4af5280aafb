"""What the committed lens_foo1 fixture says, read from its files: 0-based lines of its kernel in each run's
output_code.py (the prelude before the kernel grows with the compiler; `regenerate.py` rewrites the fixture)
and the profiled run's measured times (real timings: different each time it is regenerated)."""
from __future__ import annotations

import json

from lsp_workspaces import LENS_FOO1, OK_RUN

KERNEL = "cpp_fused_cat_maximum_neg_0"
PROFILED = json.loads((LENS_FOO1 / "runs" / OK_RUN / "lens" / "graph_0" / "profile.json").read_text())
KERNEL_TIMED = PROFILED["kernels"][0]


def output_lines(run: str = OK_RUN) -> list[str]:
    return (LENS_FOO1 / "runs" / run / "lens" / "graph_0" / "output_code.py").read_text().splitlines()


def code_line(text: str, run: str = OK_RUN) -> int:
    """The 0-based line of the run's output_code.py containing `text`; exactly one must."""
    found = [i for i, line in enumerate(output_lines(run)) if text in line]
    assert len(found) == 1, (text, run, found)
    return found[0]


KERNEL_START = code_line(f'extern "C" void {KERNEL}(')
KERNEL_END = output_lines().index("'''") - 1  # the closing brace: the C++ source's last line
KERNEL_LOAD_X2_LINE = code_line("auto tmp0 = in_ptr0[x1];")  # maximum's first operand (x2)
KERNEL_NEG_LINE = code_line("auto tmp2 = decltype(tmp1)(-tmp1);")
KERNEL_MAX_LINE = code_line("auto tmp3 = max_propagate_nan(tmp0, tmp2);")
KERNEL_CAT_LINE = code_line("out_ptr0[x1] = tmp3;")
KERNEL_CALL_LINE = code_line(f"{KERNEL}(arg1_1.data_ptr()")  # in call(args): runs all three nodes
