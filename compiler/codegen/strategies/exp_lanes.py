"""A float `exp` inside a loop over one vector's lanes, computed by an inline vector function.

g++ vectorizes `lens_exp` in an `omp simd` loop as a call of its 16-lane variant (compiler/cpp_text/vector_math.py),
and the vector-function ABI makes every vector register caller-saved: the loop spills and reloads what it keeps
in registers around each call, and the variant loads its constants again each time. So a lane loop (`open_lanes`:
`for (v_lane = 0; v_lane < 16k; v_lane++)`, one iteration per lane) is cut at the exp: the first half stores the
exp's operand per lane into an aligned array, `lens_exp_lanes<16k>` computes it in place, inlined, and the loop
opens again with the exp's value read back per lane. Temps of the first half are out of scope in the second:
the printer computes again those that later nodes read (expressions.py `generation`), except exps, whose lanes
it reads back from their arrays. Which lane loops cut is planned with the piece that opens them (`cuts`); the
printer cuts there (expressions.py `_cut_exp`). The same bits as the
call (the two share their body). A masked softmax row kernel (8192 x 1024): 2.25-2.65 -> 2.09-2.37 ms here.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from compiler import config
from compiler.codegen import half
from compiler.ir.nodes import Expr, Op, walk

LINE = 16  # float lanes of the vector function


@dataclass
class LaneLoop:
    var: str  # the loop's variable (`{var}_lane` runs over the lanes)
    lanes: int
    nodes: list[str]
    start: int  # index in the renderer's lines of the loop's first line (its pragma)
    indent: int  # the renderer's indent outside the loop
    count: int | None = None  # lanes the loop runs, when fewer than `lanes` (a row's tail)
    cut_exps: bool = False  # planned: exps printed directly in it are cut out (`cuts`)
    cutting: bool = False  # closed by a cut (it opens again), not ended


def inlines(dtype: torch.dtype) -> bool:
    """Whether an exp of `dtype` in a lane loop is cut out of it."""
    floats = (torch.float32, torch.bfloat16, torch.float16)  # (half values compute as floats: codegen/half.py)
    return config.cpp.inline_exp and dtype in floats and "exp" not in config.cpp.op_overrides


def cut(e: Expr) -> bool:
    """Whether IR expression `e` is an exp cut out of the lane loop it is printed directly in: a float one, not where
    each half op is rounded as eager materializes it (the exp read back from its lanes would skip that rounding,
    float16's exp(12) a finite float instead of inf)."""
    return (isinstance(e, Op) and e.name == "exp" and inlines(e.dtype)
            and not (config.emulate_precision_casts and half.is_half(e.dtype)))


def cuts(lanes: int, *bodies: Expr) -> bool:
    """Whether a lane loop of `lanes` printing `bodies` cuts an exp out (planned with its piece: the plan passes)."""
    return lanes % LINE == 0 and any(cut(e) for body in bodies for e in walk(body))
