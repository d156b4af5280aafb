"""Walks an aten FX graph and lowers each node: to a lazy TensorValue (inlined into its consumers), a
realized ComputedBuffer, or an ExternCall to ATen when no lowering applies. Never rejects a graph."""
from __future__ import annotations

import math
import operator
from typing import Any

import sympy
import torch
import torch.fx

from compiler import config
from compiler.ir.nodes import (
    ComputedBuffer,
    GraphIR,
    InputBuffer,
    Layout,
    Load,
    Node,
    Op,
    contiguous_strides,
    index_vars,
    walk,
)
from compiler.ir.size_symbols import (
    SymbolicSizeError,
    is_static,
    same_size,
    shape_of,
    size_expr,
    strides_of,
    symbolic_scalar,
)
from compiler.lowering.aliases import share_owners, storage_owner
from compiler.lowering.addmm_bias import bias_in_consumers
from compiler.lowering.extern_calls import DynamicShapeGraph, ExternCalls, target_name
from compiler.lowering.layouts import channels_last_stride, memory_order
from compiler.lowering.pointwise import elementwise
from compiler.lowering.registry import LOWERINGS
from compiler.lowering.size_symbol_reads import SizeSymbols, UnboundSymbol
from compiler.lowering.values import (
    StridedView,
    TensorValue,
    UnsupportedLowering,
    buffer_value,
    current_origin,
    origin_scope,
    size_hints,
    size_ranges,
)
from compiler.lowering.views import permute_value, reshape_value

# Inlining a value into more than one consumer recomputes it; past this many FX ops we realize instead.
INLINE_REUSE_LIMIT = 3
EXPENSIVE_OPS = {"exp", "log", "tanh", "erf", "sigmoid", "pow", "sin", "cos", "atan2", "expm1", "log1p"}
# A lazy value keeps every buffer it reads alive until the kernel computing it runs. One reading two or more buffers
# of its own element count that hold this many bytes together is realized where it is made (issue 49: a weight
# applied 12 times, Albert's, gets 12 gradient products in the backward; added lazily, all 12 stayed alive for
# one kernel at the end, 11 GiB where eager needs 3.2). It is computed alone (ComputedBuffer.alone), which keeps
# the kernels around it as they were. Values under 1/16 of it are not looked at (compile time).
HELD_BYTES_BOUND = 128 << 20


_SYMBOLIC_SCALARS = (torch.SymInt, torch.SymFloat, torch.SymBool)
# Dynamo's run-time checks of unbacked sizes (`u0 >= 0`): true of every value the extern call that defines the
# size returns, so the generated call() leaves them out, as it leaves out the guards Dynamo checks itself.
_RUNTIME_ASSERTS = (torch.ops.aten._assert_scalar.default, torch.ops.aten.sym_constrain_range_for_size.default,
                    torch.ops.aten.sym_constrain_range.default, torch.ops.aten._assert_async.msg)


class LoweringContext:
    """What a lowering function may ask about the node it lowers, and how it adds reduction buffers."""

    def __init__(self, graph: "GraphLowering", node: torch.fx.Node):
        self.graph, self.node = graph, node
        val = node.meta.get("val")
        self.meta = val
        first = val[0] if isinstance(val, (list, tuple)) and val else val
        self.out_dtype = first.dtype if isinstance(first, torch.Tensor) else None
        self.out_size = shape_of(first) if isinstance(first, torch.Tensor) else ()
        self.out_device_is_cpu = first.device.type == "cpu" if isinstance(first, torch.Tensor) else None

    def realize_reduction(self, dtype, size, ranges, rtype, loader, inlined) -> TensorValue:
        name = self.graph.new_name()
        xs, rs = index_vars(len(size)), index_vars(len(ranges), "r")
        body = loader(xs, rs)
        buf = ComputedBuffer(name, dtype, Layout(tuple(size), contiguous_strides(size)), body, xs,
                             self.graph.ordered(inlined | {self.node.name}), self.node.name,
                             reduction_type=rtype, reduction_ranges=tuple(ranges), reduction_vars=rs)
        self.graph.nodes.append(buf)
        return buffer_value(name, dtype, size, buf.layout.stride)


class GraphLowering(ExternCalls):
    def __init__(self, gm: torch.fx.GraphModule):
        self.gm = gm
        self.order = {n.name: i for i, n in enumerate(gm.graph.nodes)}
        self.inputs: list[InputBuffer] = []
        self.nodes: list[Node] = []
        self.env: dict[torch.fx.Node, Any] = {}
        self.notes: list[str] = []
        self._count = 0
        self.symbols = SizeSymbols(gm)  # Dynamo's size symbols: where call() reads each (lowering/size_symbol_reads.py)
        self.arg_names: list[str] = []
        self.scalar_inputs: dict[str, object] = {}
        self._sizes: dict[str, tuple[int, int]] = {}  # (_buffer_sizes: the buffers sized so far)
        self._sized_upto, self._sized_inputs = 0, 0
        self._held: dict[str, torch.fx.Node] = {}  # buffer -> the node whose memory the outputs returning it are

    def new_name(self) -> str:
        name = f"buf{self._count}"
        self._count += 1
        return name

    def ordered(self, names) -> list[str]:
        return sorted((n for n in names if n in self.order), key=self.order.__getitem__)

    def run(self) -> GraphIR:
        hints = size_hints.set(self.symbols.hints)
        ranges = size_ranges.set(dict(getattr(self.symbols.shape_env, "var_to_range", {})))
        try:
            ir = self._run()
            if self.symbols.any:
                self.symbols.check(ir)
        except (SymbolicSizeError, UnboundSymbol) as e:
            raise DynamicShapeGraph(str(e)) from None
        finally:
            size_hints.reset(hints)
            size_ranges.reset(ranges)
        # every placeholder in order, SymInt ones too: Dynamo passes a size it specialized to a constant (a
        # channels-last input's strides after a recompile) as an argument all the same, and call() unpacking
        # only the tensors got more arguments than names
        ir.arg_names, ir.scalar_inputs = self.arg_names, self.scalar_inputs
        if self.symbols.any:
            ir.bindings, ir.hints = self.symbols.bindings(), self.symbols.hints
        return ir

    def _run(self) -> GraphIR:
        outputs: list[tuple[str, object]] = []
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                self._placeholder(node)
            elif node.op == "call_function":
                token = current_origin.set(node.name)
                try:
                    self.env[node] = self._call(node)
                finally:
                    current_origin.reset(token)
            elif node.op == "output":
                token = current_origin.set(node.name)
                try:
                    share_owners(self, list(node.args[0]))
                    outputs = [self._output(a) for a in node.args[0]]
                finally:
                    current_origin.reset(token)
            else:
                raise UnsupportedLowering(f"FX op {node.op} ({node.name})")
        return GraphIR(self.inputs, self.nodes, outputs, self.notes)

    def _placeholder(self, node: torch.fx.Node) -> None:
        val = node.meta.get("val")
        self.arg_names.append(node.name)
        if isinstance(val, torch.SymInt):  # a size Dynamo passes as an argument
            self.scalar_inputs[node.name] = self.env[node] = size_expr(val)
            self.symbols.placeholder(node.name, val)
            return
        if not isinstance(val, torch.Tensor):
            raise DynamicShapeGraph(f"graph input {node.name} is not a tensor ({type(val).__name__})")
        self.symbols.placeholder(node.name, val)
        layout = Layout(shape_of(val), strides_of(val))
        self.inputs.append(InputBuffer(node.name, val.dtype, layout))
        self.env[node] = buffer_value(node.name, val.dtype, layout.size, layout.stride)

    def _args(self, node: torch.fx.Node):
        return torch.fx.node.map_arg((node.args, node.kwargs), lambda n: self.env[n])

    def _call(self, node: torch.fx.Node):
        val = node.meta.get("val")
        if node.target in _RUNTIME_ASSERTS:  # (checks of data-dependent sizes Dynamo already made)
            return None
        if isinstance(val, torch.SymBool) and self.symbols.known(val.node.expr):
            return sympy.sympify(val.node.expr)  # (the condition of an assert above)
        if isinstance(val, _SYMBOLIC_SCALARS) and self.symbols.known(val.node.expr):
            try:  # (sym_size, s0 * 4, sym_float(s0), ...: computed where used)
                return symbolic_scalar(val)
            except SymbolicSizeError as e:
                raise DynamicShapeGraph(f"node {node.name}: {e}") from None
        if node.target is operator.getitem:
            base, idx = node.args
            return self.env[base][idx]
        if node.target is torch.ops.aten.addmm.default and bias_in_consumers(node):
            return self._mm_then_bias(node)
        fn = LOWERINGS.get(node.target)
        reason = f"no lowering for {target_name(node.target)}"
        new = self.symbols.new_in(val)
        if new:  # (a slice to an `.item()` length: its size is known once ATen returns it)
            fn, reason = None, f"its size {new[0]} is data-dependent"
        if fn is not None:
            self._bound_fusion(node)
            args, kwargs = self._args(node)
            mark = len(self.nodes)
            try:
                ctx = LoweringContext(self, node)
                value = fn(ctx, *args, **kwargs)
                self._check(node, value)
                return self._maybe_realize(node, value)
            except (UnsupportedLowering, NotImplementedError, AssertionError, TypeError, KeyError,
                    IndexError, ValueError, ZeroDivisionError, SymbolicSizeError) as e:
                del self.nodes[mark:]  # drop buffers a failed lowering already added
                reason = f"lowering of {target_name(node.target)} failed: {type(e).__name__}: {e}"
        return self._extern(node, reason)

    def _mm_then_bias(self, node: torch.fx.Node):
        bias, a, b = self._args(node)[0]
        product = self._extern(node, "addmm's bias is added in the kernels that read the product",
                               target=torch.ops.aten.mm.default, args=(a, b))
        value = elementwise("add", [product, bias], product.dtype)
        self._check(node, value)
        return self._maybe_realize(node, value)

    def _bound_fusion(self, node: torch.fx.Node) -> None:
        """Realize inputs (largest first) until this node's inlined ops stay within max_fusion_size."""
        def lazy_inputs():
            return [n for n in node.all_input_nodes
                    if isinstance(self.env.get(n), TensorValue) and self.env[n].strided is None]

        while True:
            inputs = lazy_inputs()
            total = set().union(*[self.env[n].inlined for n in inputs]) if inputs else set()
            if len(total) + 1 <= config.max_fusion_size or not inputs:
                return
            biggest = max(inputs, key=lambda n: len(self.env[n].inlined))
            with origin_scope(biggest.name):
                self.env[biggest] = self.realize(self.env[biggest], stride=self._layout_of(biggest, self.env[biggest]),
                                                 origin=biggest.name)

    def _check(self, node: torch.fx.Node, value) -> None:
        """A lowering whose result disagrees with the fake tensor is a bug: fall back instead of lying."""
        val = node.meta.get("val")
        pairs = zip(value, val) if isinstance(value, tuple) else [(value, val)]
        for v, m in pairs:
            if isinstance(m, torch.Tensor):
                want = shape_of(m)
                if not isinstance(v, TensorValue) or len(v.size) != len(want) or not all(
                        same_size(a, b) for a, b in zip(v.size, want)) or v.dtype != m.dtype:
                    got = (getattr(v, "size", None), getattr(v, "dtype", None))
                    raise UnsupportedLowering(f"lowering gave {got}, expected {(want, m.dtype)}")

    def _maybe_realize(self, node: torch.fx.Node, value):
        if not isinstance(value, TensorValue):
            return value
        if self._holds_large_buffers(value):  # (in a kernel of its own, which frees them)
            realized = self.realize(value, stride=self._layout_of(node, value))
            self.nodes[-1].alone = True
            return realized
        if len(node.users) > 1 and self._costly(value):
            return self.realize(value, stride=self._layout_of(node, value))
        return value

    def _holds_large_buffers(self, value: TensorValue) -> bool:
        """Whether lazy `value` reads at least two buffers of its own element count holding HELD_BYTES_BOUND
        bytes or more together (what computing it later would keep alive until then)."""
        if value.strided is not None or not is_static(value.size):
            return False
        numel = math.prod(value.size)
        if numel * value.dtype.itemsize * 16 < HELD_BYTES_BOUND:
            return False
        sizes = self._buffer_sizes()
        names = {e.buffer for e in walk(value.load(index_vars(len(value.size)))) if isinstance(e, Load)}
        held = [sizes[b][1] for b in names if b in sizes and sizes[b][0] == numel]
        return len(held) >= 2 and sum(held) >= HELD_BYTES_BOUND

    def _buffer_sizes(self) -> dict[str, tuple[int, int]]:
        """Each buffer of static size made so far (graph inputs, computed buffers, extern outputs) -> (its
        element count, its bytes); kept up to date as nodes are added."""
        self._sized_upto = min(self._sized_upto, len(self.nodes))  # (a failed lowering dropped what it added)
        layouts = [(b.name, b.dtype, b.layout) for b in self.inputs[self._sized_inputs:]]
        self._sized_inputs = len(self.inputs)
        for n in self.nodes[self._sized_upto:]:
            if isinstance(n, ComputedBuffer):
                layouts.append((n.name, n.dtype, n.layout))
            else:
                layouts.extend((o[0], o[1], o[2]) for o in n.outputs if o)
        self._sized_upto = len(self.nodes)
        for name, dtype, layout in layouts:
            if is_static(layout.size):
                numel = math.prod(layout.size)
                self._sizes[name] = (numel, numel * dtype.itemsize)
        return self._sizes

    @staticmethod
    def _layout_of(node: torch.fx.Node, value: TensorValue) -> tuple[int, ...] | None:
        """The strides a value realized for `node` is written with: channels-last where eager's is (the traced
        tensor's), so that a conv net given channels-last tensors reads and writes every kernel in that one order;
        contiguous (None) otherwise."""
        return channels_last_stride(node.meta.get("val"), value.size)

    def _costly(self, value: TensorValue) -> bool:
        """Whether recomputing `value` in each consumer costs more than a buffer: at least INLINE_REUSE_LIMIT
        operations in its body (views, aliases and scalar constants among its FX nodes compute nothing: a ReLU's
        backward, `where(le(out, 0), 0, grad)`, is two, recomputed in BatchNorm backward's reductions and its input
        gradient instead of written and read back), or one expensive operation."""
        if value.strided is not None:  # a plain (view of a) buffer: loading it twice is free
            return False
        ops = [e for e in walk(value.load(index_vars(len(value.size)))) if isinstance(e, Op)]
        if len(value.inlined) >= INLINE_REUSE_LIMIT and len(ops) >= INLINE_REUSE_LIMIT:
            return True
        return any(e.name in EXPENSIVE_OPS for e in ops)

    def realize(self, value: TensorValue, stride: tuple[int, ...] | None = None, is_output: bool = False,
                origin: str | None = None) -> TensorValue:
        base = value.reshape_of
        if base is not None and value.strided is None and (stride is None or tuple(stride) == contiguous_strides(
                value.size)) and not is_output and 0 not in value.size:
            return reshape_value(self.realize(base, origin=origin), tuple(value.size))
        order = memory_order(value.size, stride)
        if order is not None:  # a dense layout in another dimension order: computed in memory order
            inverse = sorted(range(len(order)), key=order.__getitem__)
            dense = self.realize(permute_value(value, order), is_output=is_output, origin=origin)
            return permute_value(dense, inverse)
        name = self.new_name()
        xs = index_vars(len(value.size))
        org = origin or current_origin.get()
        layout = Layout(tuple(value.size), tuple(stride) if stride else contiguous_strides(value.size))
        with origin_scope(org):
            body = value.load(xs)
        buf = ComputedBuffer(name, value.dtype, layout, body, xs,
                             self.ordered(value.inlined | {org}), org, is_output=is_output)
        self.nodes.append(buf)
        return buffer_value(name, value.dtype, layout.size, layout.stride)

    def _output(self, arg) -> tuple[str, object]:
        if not isinstance(arg, torch.fx.Node):
            return ("value", arg)
        value = self.env[arg]
        if not isinstance(value, TensorValue):
            return ("value", value)
        meta = arg.meta["val"]
        shape, strides = shape_of(meta), strides_of(meta)
        st, owner = value.strided, storage_owner(arg)
        if st is not None and self._matches(st, shape, strides) and self._may_hold(st.buffer, owner):
            self._held[st.buffer] = owner
            if st.offset == 0 and st.size == shape and self._is_whole(st):
                return ("buffer", st.buffer)
            return ("view", StridedView(st.buffer, shape, strides, st.offset))
        realized = self.realize(value, stride=strides, is_output=True, origin=arg.name).strided
        self._held[realized.buffer] = owner
        if realized.size == shape and self._is_whole(realized):
            return ("buffer", realized.buffer)
        return ("view", StridedView(realized.buffer, shape, strides, 0))

    def _may_hold(self, buffer: str, owner: torch.fx.Node) -> bool:
        """Whether an output whose memory is `owner`'s (aliases.storage_owner) may be `buffer`: a graph input only
        where the output is (a view of) that input, and a buffer another output holds only where that output's
        memory is the same node's. A clone of an input, or two equal clones, are fresh buffers as in eager: a caller
        writing one changes nothing else."""
        if buffer in self._held:
            return self._held[buffer] is owner
        return owner.op == "placeholder" or buffer not in {b.name for b in self.inputs}

    def _matches(self, st: StridedView, shape: tuple, strides: tuple) -> bool:
        return all(same_size(a, b) for a, b, s in zip(st.stride, strides, shape) if s != 1)

    def _is_whole(self, st: StridedView) -> bool:
        layouts = {b.name: b.layout for b in self.inputs}
        for n in self.nodes:
            if isinstance(n, ComputedBuffer):
                layouts[n.name] = n.layout
            else:
                layouts.update({o[0]: o[2] for o in n.outputs if o})
        lay = layouts.get(st.buffer)
        return lay is not None and lay.size == st.size and all(
            a == b for a, b, s in zip(lay.stride, st.stride, st.size) if s != 1)


def lower_graph(gm: torch.fx.GraphModule) -> GraphIR:
    return GraphLowering(gm).run()



