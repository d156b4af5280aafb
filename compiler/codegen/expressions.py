"""Rendering IR expressions as C++ temps, for KernelRenderer (compiler/codegen/cpp.py): children first, common
subexpressions once per block, and the bookkeeping of lane loops cut around an inline exp
(compiler/codegen/strategies/exp_lanes.py): temps of an older generation are out of scope and computed again, cut exps
are read back from their arrays."""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy
import torch

from compiler import config
from compiler.codegen import half
from compiler.codegen.cpp_ops import CTYPES, render_cast, render_constant, render_op
from compiler.codegen.index import cpp_index, flat_load_index
from compiler.codegen.plan import NodeBody
from compiler.codegen.strategies import exp_lanes
from compiler.codegen.strategies.kernel_locals import LocalBufferError
from compiler.ir.nodes import Cast, Constant, Expr, IndexValue, Load, Op, walk


_SELECT_BITS = (torch.float32, torch.float64, torch.int32, torch.int64)  # `where` as bits (cpp_ops.lens_select_bits)


@dataclass
class _Block:
    """Statements of one innermost loop body, with common-subexpression elimination."""

    temps: dict[tuple, str] = field(default_factory=dict)


class ExpressionRenderer:
    """Expression methods of KernelRenderer (which provides `layouts`, `locals`, `local_stores`, `params`,
    `lane_loops`, `statement`, `local_index`)."""

    def init_expressions(self) -> None:
        self.tmp_count = 0
        self.generation = 0  # bumped where a lane loop is cut: temps of an older one are out of scope
        self.temp_generation: dict[str, int] = {}
        self.exp_values: dict[int, str] = {}  # id of an exp node cut in the lane loop open now -> its lanes

    def lane_values_end(self) -> None:
        """A lane loop ends or opens: the exps cut in the one before are out of scope."""
        self.exp_values = {}

    def flat(self, ld: Load) -> sympy.Expr:
        return flat_load_index(self.layouts[ld.buffer][1], ld.index)

    def body_value(self, b: NodeBody) -> str:
        """Emit the temps of a node body `b` in a block of their own; the operand naming its value."""
        return self.value(b.body, _Block())

    def value(self, e: Expr, block: _Block) -> str:
        """Emit temps for `e` (children first) and return the C++ operand naming its value."""
        names: dict[int, str] = {}
        for node in walk(e):
            names[id(node)] = self._render_node(node, names, block)
        return names[id(e)]

    def _operand(self, arg: Expr, names: dict[int, str], block: _Block) -> str:
        """The name of `arg`'s value, computed again when it is a temp from before a cut lane loop."""
        name = names[id(arg)]
        if self.temp_generation.get(name, self.generation) != self.generation:
            names[id(arg)] = name = self.value(arg, block)
        return name

    def _operands(self, node: Expr, names: dict[int, str], block: _Block) -> list[str]:
        """Names of `node`'s operands, all of this generation (computing one again may cut the loop again,
        once: exps computed before read their lanes back, codegen/strategies/exp_lanes.py)."""
        while True:
            generation = self.generation
            operands = [self._operand(a, names, block) for a in (node.args if isinstance(node, Op) else [node.arg])]
            if generation == self.generation:
                return operands

    def _render_node(self, node: Expr, names: dict[int, str], block: _Block) -> str:
        if isinstance(node, Constant):
            return render_constant(node.value, node.dtype)
        if isinstance(node, IndexValue):
            return render_cast(cpp_index(node.expr), torch.int64, node.dtype)
        if isinstance(node, Op) and id(node) in self.exp_values:  # an exp cut before in this lane loop
            return self._temp(f"{self.exp_values[id(node)]}[{self.lane_loops[-1].var}_lane]", node.origin)
        if isinstance(node, Load):
            mirror = self.mirrors.get(node.buffer)
            if mirror is not None and sympy.expand(self.flat(node) - mirror[0]) == 0:
                return mirror[1]
            local = self.locals.get(node.buffer)
            if local is not None and local.scalar:
                if sympy.expand(self.flat(node) - self.local_stores[node.buffer]) != 0:
                    raise LocalBufferError(f"{node.buffer} is read at another outer iteration than it is written")
                return local.name
            if local is not None:
                idx = cpp_index(self.local_index(self.flat(node)))
                key: tuple = ("load", node.buffer, idx)
                text = f"{local.name}[{idx}]"
            else:
                idx = cpp_index(self.flat(node))
                key = ("load", node.buffer, idx)
                text = half.load(node.dtype, f"{self.params[node.buffer].param}[{idx}]")
        elif isinstance(node, Cast):
            src = self._operands(node, names, block)[0]
            key = ("cast", node.dtype, src)
            text = render_cast(src, node.arg.dtype, node.dtype)
        elif isinstance(node, Op):
            operands = self._operands(node, names, block)
            key = ("op", node.name, node.dtype, tuple(operands))
            if node.name == "where" and self._loop_invariant(node.args[0]) and node.dtype in _SELECT_BITS \
                    and node.args[1].dtype == node.args[2].dtype == node.dtype:
                ctype = CTYPES[node.dtype]
                text = f"lens_select_bits<{ctype}>({operands[0]}, {operands[1]}, {operands[2]})"
            else:
                text = render_op(node.name, operands, [a.dtype for a in node.args])
            if config.emulate_precision_casts:  # each half op's result as eager materializes it (half.py)
                text = half.round_to(node.dtype, text)
        else:
            raise TypeError(f"unknown IR expression {node!r}")
        got = block.temps.get(key)
        if got is not None and self.temp_generation.get(got) == self.generation:
            return got
        if isinstance(node, Load) and self._hoisted_load(node):
            name = block.temps[key] = self._new_temp()
            self.hoist(f"auto {name} = {text};", node.origin)
            self.temp_generation[name] = self.generation
            return name
        loop = self.lane_loops[-1] if self.lane_loops else None
        if loop is None or not loop.cut_exps or not exp_lanes.cut(node) or self.indent != loop.indent + 1:
            name = block.temps[key] = self._temp(text, node.origin)
            return name
        name = self._new_temp()  # (an exp directly in a lane loop planned to cut its exps)
        self.exp_values[id(node)] = self._cut_exp(loop, name, operands[0], node.origin)
        self.temp_generation[name] = self.generation
        return name

    def _cut_exp(self, loop: exp_lanes.LaneLoop, name: str, operand: str, origin: str | None) -> str:
        """Print `name = exp(operand)` across a cut of `loop` (exp_lanes.py); temps from before the cut are stale
        afterwards. Returns the array holding the exp's lanes until the lane loop ends: a later cut reads them back
        from there rather than computing the exp again."""
        array = f"{name}_lanes"
        init = "" if loop.count is None else " = {}"  # (a tail's unused lanes: zeros, not whatever the stack held)
        self.lines.insert(loop.start, ("    " * loop.indent + f"alignas(64) float {array}[{loop.lanes}]{init};",
                                       [origin] if origin else []))
        self.statement(f"{array}[{loop.var}_lane] = {operand};", origin)
        loop.cutting = True
        self.close()
        self.statement(f"lens_exp_lanes<{loop.lanes}>({array});", origin)
        self.open_lanes_named(loop.var, loop.lanes, loop.nodes, loop.count, loop.cut_exps)
        self.generation += 1
        self.statement(f"auto {name} = {array}[{loop.var}_lane];", origin)
        return array

    def _loop_invariant(self, cond: Expr) -> bool:
        """Whether `cond` is the same at every step of the innermost loop open now: indices and constants only,
        none of them the loop's variable."""
        if not self.loops:
            return False
        var = self.loops[-1][0]
        for e in walk(cond):
            if isinstance(e, IndexValue) and any(s.name == var for s in e.expr.free_symbols):
                return False
            if not isinstance(e, (IndexValue, Constant, Op, Cast)):
                return False
        return True

    def _hoisted_load(self, ld: Load) -> bool:
        """Whether load `ld`, printed directly in the innermost loop, reads the same element at every step of it and
        goes before the loop (printer.py can_hoist): a graph or earlier kernel's input (`in_ptr`, which no node of
        this kernel writes), indexed by the outer loops alone, like a batch norm's per-channel mean read in its
        backward's output pass. In the loop, such a read kept g++ from vectorizing it: a (144, 56, 56) batch-norm
        backward's output pass ran scalar ("latch block not empty"), 60% of its kernel's time (issue 49)."""
        if not self.can_hoist() or ld.buffer in self.locals or not self.params[ld.buffer].param.startswith("in_ptr"):
            return False
        var = self.loops[-1][0]
        return all(s.name != var for s in self.flat(ld).free_symbols)

    def _new_temp(self) -> str:
        self.tmp_count += 1
        return f"tmp{self.tmp_count - 1}"

    def _temp(self, text: str, origin: str | None) -> str:
        """A new temp of this generation holding `text`."""
        name = self._new_temp()
        self.statement(f"auto {name} = {text};", origin)
        self.temp_generation[name] = self.generation
        return name
