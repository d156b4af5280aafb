"""A float `exp` inside a loop over one vector's lanes, computed by an inline vector function.

g++ vectorizes `lens_exp` in an `omp simd` loop as a call of its 16-lane variant (compiler/cpp_text/vector_math.py),
and the vector-function ABI makes every vector register caller-saved: the loop spills and reloads what it keeps
in registers around each call, and the variant loads its constants again each time. So a lane loop (`open_lanes`:
`for (v_lane = 0; v_lane < 16k; v_lane++)`, one iteration per lane) is cut at the exp: the first half stores the
exp's operand per lane into an aligned array, `lens_exp_lanes<16k>` computes it in place, inlined, and the loop
opens again with the exp's value read back per lane. Temps of the first half are out of scope in the second:
the renderer computes again those that later nodes read (`KernelRenderer.generation`), except exps, whose lanes
it reads back from their arrays. The same bits as the
call (the two share their body). A masked softmax row kernel (8192 x 1024): 2.25-2.65 -> 2.09-2.37 ms here.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from compiler import config

LINE = 16  # float lanes of the vector function


@dataclass
class LaneLoop:
    var: str  # the loop's variable (`{var}_lane` runs over the lanes)
    lanes: int
    nodes: list[str]
    start: int  # index in the renderer's lines of the loop's first line (its pragma)
    indent: int  # the renderer's indent outside the loop
    count: int | None = None  # lanes the loop runs, when fewer than `lanes` (a row's tail)
    cutting: bool = False  # closed by a cut (it opens again), not ended


def inlines(dtype: torch.dtype) -> bool:
    """Whether an exp of `dtype` in a lane loop is cut out of it."""
    floats = (torch.float32, torch.bfloat16, torch.float16)  # (half values compute as floats: codegen/half.py)
    return config.cpp.inline_exp and dtype in floats and "exp" not in config.cpp.op_overrides


def applies(r, dtype: torch.dtype) -> LaneLoop | None:
    """The lane loop an exp of `dtype` rendered now is directly in, when it is cut there."""
    loop = r.lane_loops[-1] if r.lane_loops else None
    if not inlines(dtype) or loop is None or loop.lanes % LINE or r.indent != loop.indent + 1:
        return None
    return loop


def cut(r, loop: LaneLoop, name: str, operand: str, origin: str | None) -> str:
    """Emit `name = exp(operand)` across a cut of `loop` (see the module doc); the renderer's temps from before
    the cut are stale afterwards. Returns the array holding the exp's lanes until the lane loop ends: a later
    cut reads them back from there rather than computing the exp again."""
    array = f"{name}_lanes"
    init = "" if loop.count is None else " = {}"  # (a tail's unused lanes: zeros, not whatever the stack held)
    r.lines.insert(loop.start, ("    " * loop.indent + f"alignas(64) float {array}[{loop.lanes}]{init};",
                                [origin] if origin else []))
    r.statement(f"{array}[{loop.var}_lane] = {operand};", origin)
    loop.cutting = True
    r.close()
    r.statement(f"lens_exp_lanes<{loop.lanes}>({array});", origin)
    r.open_lanes_named(loop.var, loop.lanes, loop.nodes, loop.count)
    r.generation += 1
    r.statement(f"auto {name} = {array}[{loop.var}_lane];", origin)
    return array
