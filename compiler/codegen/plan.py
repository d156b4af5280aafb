"""A kernel's plan: its loop nest, each node's body in it, and the strategies chosen for it with the reasons
(codegen/plan_passes.py builds it by named passes, codegen/cpp.py prints it). Data only: planning and printing
modules both import it, it imports neither."""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy
import torch

from compiler.codegen.index import flat_load_index
from compiler.codegen.strategies.kernel_locals import LocalBuffer
from compiler.codegen.strategies.size_variants import Assumptions
from compiler.ir.nodes import ComputedBuffer, Expr, Layout, Load
from compiler.ir.size_symbols import Size
from compiler.scheduler import FusedKernel

STRATEGIES = ("column", "total", "nest")  # a column reduction's blocks, a total's thread partials, the loop nest


@dataclass
class PlanContext:
    """What planning reads of a kernel: its nodes, buffers' layouts, kernel-local buffers, parameters, outputs
    written over inputs, size symbols, and a size variant's assumptions (None: static, or the generic body)."""

    kernel: FusedKernel
    layouts: dict[str, tuple[torch.dtype, Layout]]
    locals: dict[str, LocalBuffer]
    params: dict  # buffer name -> its parameter (inplace.KernelArg: inplace.py imports the printer's tables)
    inplace: set[str]
    sizes: list[sympy.Symbol]  # the size symbols it takes ([] for a static kernel)
    assume: Assumptions | None = None

    @property
    def plans(self) -> bool:
        """Whether strategies are planned from sizes: concrete ones, or a size variant's hints (a generic
        symbolic kernel runs plain loops)."""
        return not self.sizes or self.assume is not None

    def flat(self, ld: Load) -> sympy.Expr:
        """The flat element index load `ld` reads."""
        return flat_load_index(self.layouts[ld.buffer][1], ld.index)


@dataclass
class NodeBody:
    """One node of a kernel in the kernel's loops: its body and store index over the shared outer variables and
    its own inner and reduction variables (codegen/loop_nest.py)."""

    body: Expr
    store: sympy.Expr  # the flat index it stores at
    inner: tuple[list[sympy.Symbol], list[Size]]  # its own pointwise loops inside the outer ones: vars, sizes
    red: tuple[list[sympy.Symbol], list[Size]]  # its reduction loops: vars, sizes
    exprs: list[sympy.Expr]  # every index it computes (what the outer loops may be merged over)
    work: Size  # elements of work per outer iteration


@dataclass
class InnerLoops:
    """A node's own pointwise loops inside the outer ones, as planned (plan_passes.inner_loops): merged where every
    index walks adjacent loops as one (`subst` rewrites its body and store: `body`, `store`), and each loop's pragma
    (the first on threads where the outer loop is not and the work is enough, the last `omp simd`)."""

    vars: list[sympy.Symbol]
    sizes: list[Size]
    subst: dict
    pragmas: list[str | None]
    body: Expr
    store: sympy.Expr
    streamed_row: str = ""  # a streamed node's innermost loop: "lines", "peeled" or "" (streaming.row_layout)
    row_lanes: int = 0  # its lines' elements ("lines", "peeled")
    row_main: int = 0  # "lines": the elements of whole lines (a plain tail after them)
    cut_exps: bool = False  # its streamed lines' lane loops cut their exps out (exp_lanes.py)
    splits: list[int] = field(default_factory=list)  # where its last loop is cut into loops (range_splits.py)


@dataclass
class ReductionLoop:
    """How a reduction of the loop nest runs in its own loops (plan_passes.reduction_loops), as printed by cpp.py,
    lane_reduction.py and row_blocks.py: `how` one of REDUCTION_LOOPS."""

    how: str
    acc: str  # its accumulator
    lanes: int = 0  # per-lane partials: elements of one register of them ("lanes", "wide_sum", "blocked")
    registers: int = 1  # registers of lanes kept ("lanes", "wide_sum": lane_reduction.WIDE where rows are whole)
    main: Size = 0  # elements the lanes take of the innermost loop ("lanes", "wide_sum")
    tail: bool = False  # elements past `main`, combined one at a time
    nan_sums: bool = False  # floating max/min: a second set of lanes sums the values, NaN when a NaN went by
    op: str = ""  # the `omp simd reduction` operator ("simd")
    cut_exps: bool = False  # its lane loop cuts its exps out (exp_lanes.py)

    @property
    def partials(self) -> int:
        return self.lanes * self.registers

    def describe(self) -> str:
        """The loop as kernel_plans.json's decision says it."""
        if self.how in ("lanes", "wide_sum"):
            regs = f"{self.registers} registers of {self.lanes} lanes" if self.registers > 1 else f"{self.lanes} lanes"
            return (f"{self.partials} partials in {self.acc}_lanes ({regs})" + (", NaN noticed by sum lanes"
                    if self.nan_sums else "") + (f", a scalar tail from {self.main}" if self.tail else ""))
        if self.how == "blocked":
            return f"{self.lanes} partials in {self.acc}_lanes, a block of a line at a time"
        if self.how == "simd":
            return f"omp simd reduction({self.op}:{self.acc})"
        if self.how == "thread_partials":
            return f"a partial per thread, each an omp simd reduction({self.op}:{self.acc}_part)"
        return {"scalar": f"a scalar loop into {self.acc}", "none": f"no loop: {self.acc}"}[self.how]


REDUCTION_LOOPS = ("lanes", "wide_sum", "blocked", "simd", "scalar", "none", "thread_partials")


@dataclass
class SiblingPair:
    """A row's producer and the reduction reading it back in one loop (plan_passes.sibling_pairs, printed by
    sibling_loops.py): by lines of the prefetching pass ("lines"), by blocks of exp lanes and a tail block of fewer
    ("lane_blocks"), or one `omp simd reduction` loop ("simd")."""

    reduction: str  # the reduction node's name
    body: NodeBody  # its body in the producer's loop
    how: str
    acc: str  # the reduction's accumulator
    lanes: int = 0  # per-lane partials ("lines", "lane_blocks")
    main: int = 0  # "lane_blocks": elements of whole blocks
    tail: bool = False  # "lane_blocks": a block of fewer lanes runs the rest
    op: str = ""  # "simd": the `omp simd reduction` operator
    cut_exps: bool = False  # its lane loop cuts its exps out (exp_lanes.py)

    def describe(self) -> str:
        if self.how == "lines":
            return f"by lines of {self.lanes} lanes into {self.acc}_lanes, asking for the next row's lines"
        if self.how == "lane_blocks":
            return (f"by blocks of {self.lanes} lanes up to {self.main} into {self.acc}_lanes"
                    + (", then a tail block" if self.tail else ""))
        return f"omp simd reduction({self.op}:{self.acc})"


@dataclass
class ColumnPlan:
    """A column reduction's loops (column_reduction.plan_column): its first `reductions` nodes reduced into blocks of
    `block` contiguous outputs (on threads, a block each, where `parallel`) in each index of the `outer` loops before
    the outputs' loop, or, with `phases`, passes over the rows split among threads; then the pointwise epilogue per
    output."""

    reductions: int
    block: Size = 0
    parallel: bool = False
    phases: list[list[int]] | None = None  # the reductions grouped into passes over the rows (threads split them)
    chunk_rows: int = 0  # phases: rows reduced into a fresh chunk partial before it joins the thread's
    held: dict[str, str] = field(default_factory=dict)  # kernel-local reduction -> the value later nodes read of it
    anchors: dict[str, str] = field(default_factory=dict)  # phases: reduction -> the input its chunk is placed against
    partials: dict[str, torch.dtype] = field(default_factory=dict)  # phases: reduction -> its threads' partials' dtype
    outer: list[Size] = field(default_factory=list)  # sizes of the outer loops around the blocks (a middle axis)

    def describe(self) -> str:
        if self.phases:
            kept = ", ".join(f"{name} in {str(dtype).removeprefix('torch.')}" for name, dtype in self.partials.items())
            return (f"rows split among threads, passes {self.phases}, chunks of {self.chunk_rows} rows, "
                    f"partials ({kept}) combined in thread order")
        around = f" in each of {sizes_text(self.outer)} outer indices" if self.outer else ""
        per = ", an outer index and block per thread" if self.outer else ", a block per thread"
        return f"blocks of {self.block} outputs" + around + (per if self.parallel else "")


@dataclass
class LoopNest:
    """The outer loops every node of the kernel shares."""

    vars: list[sympy.Symbol] = field(default_factory=list)
    sizes: list[Size] = field(default_factory=list)
    parallel: bool = False  # the first outer loop runs on threads
    parallel_if: str = ""  # symbolic work: the clause that decides threads at run time
    flat: bool = False  # no node has loops of its own: the last outer loop is the vector loop
    simdlen: str = ""  # the `simdlen(N)` clause of `omp simd` pragmas (config.cpp.simdlen)
    total: Size = 1  # elements of work of the whole nest
    pragmas: list[str | None] = field(default_factory=list)  # each outer loop's OpenMP pragma (loop_nest.py)
    region: str = ""  # a streaming kernel's parallel region around them (its loops' worksharing `for`s in it)
    splits: list[int] = field(default_factory=list)  # where the last loop is cut into loops of its own (range_splits.py)


@dataclass
class RowPrefetch:
    """Where a row kernel asks for the next row of its inputs: one line of each target at the top of every
    block of a line of a later pass (`into`: the name of the node whose loop that is), or all lines at once
    after the first pass (`after`: the index of its node); neither when there is no target (prefetch.py)."""

    row: str = ""  # the outer loop variable over rows, and its trip count
    rows: int | str = 0  # (C++ text for a symbolic count)
    targets: list[tuple[str, str, int, int]] = field(default_factory=list)  # param, next row's start, length, lanes
    into: str = ""
    after: int = -1

    @property
    def lanes(self) -> int:
        return self.targets[0][3]

    def burst(self) -> list[str]:
        loops = [f"for (int64_t pf = 0; pf < {length}; pf += {lanes}) __builtin_prefetch({param} + {start} + pf, 0, 3);"
                 for param, start, length, lanes in self.targets]
        return [f"if ({self.row} + 1 < {self.rows})", "{", *("    " + t for t in loops), "}"]

    def lines(self, base: str) -> str:
        """At the top of the block of a line starting at element `base` of the row (targets share one shape)."""
        fetches = " ".join(f"__builtin_prefetch({param} + {start} + {base}, 0, 3);" for param, start, _, _ in self.targets)
        return f"if ({self.row} + 1 < {self.rows}) {{ {fetches} }}"


@dataclass(frozen=True)
class OutputParam:
    """A node's output parameter in the kernel's signature and its element type in memory (what a streamed line
    is written to)."""

    param: str
    ctype: str


@dataclass
class FlatBlocks:
    """A flat kernel's vector loop (the last outer loop) by blocks of whole lines, where its streamed nodes stage a
    line each and write it out; elements past `main` run plainly (streaming.flat_blocks)."""

    lanes: int
    main: Size
    tail: bool
    pragma: str | None  # the loop by lines' own pragma (the lane loop is the vector loop now)
    stage: dict[str, str] = field(default_factory=dict)  # streamed node -> the line element its store goes to


@dataclass
class DeferredPass:
    """A row kernel's output pass run a row late, inside the next row's prefetching pass (pipeline.py)."""

    node: ComputedBuffer
    body: NodeBody
    row: sympy.Symbol  # the outer loop variable
    arrays: list[str]  # local arrays it reads (two slots)
    scalars: list[str]  # scalar locals it reads (kept a row longer)
    locals: dict[str, LocalBuffer] = field(default_factory=dict)  # of those: each node's local buffer
    ctypes: dict[str, str] = field(default_factory=dict)  # and its C++ type
    scalar_reads: dict[str, sympy.Expr] = field(default_factory=dict)  # scalar -> the flat index it reads it at
    out: OutputParam | None = None  # where its lines stream
    cut_exps: bool = False  # its lines' lane loops cut their exps out (exp_lanes.py)


@dataclass(frozen=True)
class Decision:
    """One choice a planning pass made, and why: `subject` a node or loop name ('' for the kernel)."""

    pass_name: str
    subject: str
    choice: str
    reason: str

    def __str__(self) -> str:
        about = f" {self.subject}" if self.subject else ""
        return f"{self.pass_name}:{about}: {self.choice}: {self.reason}"


@dataclass
class KernelPlan:
    """Everything decided about one kernel before a line of it is printed."""

    kernel: str
    nest: LoopNest = field(default_factory=LoopNest)
    bodies: list[NodeBody] = field(default_factory=list)
    strategy: str = ""  # one of STRATEGIES, once chosen
    column: ColumnPlan | None = None  # a column reduction's blocks or passes
    streamed: set[str] = field(default_factory=set)  # nodes whose stores stream (streaming.py)
    stream_out: dict[str, OutputParam] = field(default_factory=dict)  # streamed node -> where its lines go
    flat_blocks: FlatBlocks | None = None  # a streamed flat kernel's vector loop by lines
    row_prefetch: RowPrefetch = field(default_factory=RowPrefetch)
    deferred: DeferredPass | None = None
    pairs: dict[str, SiblingPair] = field(default_factory=dict)  # producer -> the reduction in its loop
    joint: dict[str, list[str]] = field(default_factory=dict)  # pointwise node -> the later ones in its loop
    accumulators: dict[str, str] = field(default_factory=dict)  # reduction node -> its accumulator's name
    reduction_loops: dict[str, ReductionLoop] = field(default_factory=dict)  # reduction node -> how its loop runs
    inner: dict[str, InnerLoops] = field(default_factory=dict)  # node -> its own pointwise loops, as printed
    mirrors: dict[str, str] = field(default_factory=dict)  # node -> the scalar later nodes read its stored value from
    assumptions: list[str] = field(default_factory=list)  # a size variant's checks the plan relies on
    decisions: list[Decision] = field(default_factory=list)

    def decide(self, pass_name: str, subject: str, choice: str, reason: str) -> None:
        self.decisions.append(Decision(pass_name, subject, choice, reason))

    def choices(self, pass_name: str, subject: str | None = None) -> list[str]:
        """The choices one pass made (about `subject`, or all)."""
        return [d.choice for d in self.decisions
                if d.pass_name == pass_name and (subject is None or d.subject == subject)]


def sizes_text(sizes) -> str:
    """Loop sizes as a decision says them: `16×64`, `none` for no loop."""
    return "×".join(str(s) for s in sizes) or "none"


class PlanError(Exception):
    """A plan that contradicts itself after a pass (LENS_VERIFY_PLAN=1, codegen/plan_verify.py)."""

    def __init__(self, kernel: str, pass_name: str, problem: str):
        super().__init__(f"kernel {kernel}: plan inconsistent after pass '{pass_name}': {problem}")
        self.kernel, self.pass_name, self.problem = kernel, pass_name, problem
