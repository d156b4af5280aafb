"""Lowering's ATen calls: a node no lowering computes (and mm/addmm/bmm/convolution) becomes an ExternCall whose
tensor arguments are buffers (`ExternCalls`, the part of GraphLowering that builds them), and the exceptions that
send a graph to run eagerly."""
from __future__ import annotations

import torch
import torch.fx

from compiler.ir.nodes import ExternArg, ExternCall, Layout
from compiler.ir.size_symbols import SymbolicSizeError, shape_of, size_expr, strides_of
from compiler.lowering.layouts import channels_last_dense, dense_stride, eager_strides, stride_in_order_of
from compiler.lowering.values import TensorValue, buffer_value, origin_scope
from compiler.machine import conv_packed
from lens_format.notes import ExternNote


class EagerGraph(Exception):
    """Generated code cannot run this graph; the frontend runs it eagerly instead (with a note why)."""


class DynamicShapeGraph(EagerGraph):
    """The graph's symbolic sizes cannot be generated: one that no input gives, or an input's size that
    generated code cannot compute (the message names it)."""


def target_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}.{target._overloadname}"
    if isinstance(target, torch._ops.HigherOrderOperator):  # e.g. with_effects around _linalg_check_errors
        return f"higher_order.{target.name()}"
    return getattr(target, "__name__", str(target))


def _callable_from_output_code(target) -> bool:
    return isinstance(target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator))


# Functional ops whose ATen kernel copies their first argument before changing it, and the in-place form of each
# (same arguments, returns that argument): used where the first argument's buffer is computed for the call alone
# (an embedding's backward: index_put(zeros, ...) on a 94 MB table copied 94 MB per step).
_IN_PLACE_FORMS = {
    torch.ops.aten.index_put.default: torch.ops.aten.index_put_.default,
    torch.ops.aten.index_add.default: torch.ops.aten.index_add_.default,
    torch.ops.aten.scatter_add.default: torch.ops.aten.scatter_add_.default,
    torch.ops.aten.scatter.src: torch.ops.aten.scatter_.src,
    torch.ops.aten.scatter.value: torch.ops.aten.scatter_.value,
}

# ops that make these arguments dense and channels-last before they read them (the convolution's input, and
# `lens.conv2d_onednn_add`'s residual): a view with gaps (a channel slice of a buffer others read too: MixNet's split
# block inputs, 81 ATen copies a call) is copied by a generated kernel instead, densely in its own dimension order,
# and a value computed for the call alone (an autocast cast of the network's input, a pad) is written channels-last
# by its kernel instead of copied by the op
_CHANNELS_LAST_ARGUMENTS = {conv_packed.CONV2D_ONEDNN: (0,), conv_packed.CONV2D_ONEDNN_ADD: (0, 1)}


class ExternCalls:
    """GraphLowering's extern calls (it keeps `env`, `nodes`, `notes`, `symbols`, `realize`, `new_name`, `_args`)."""

    def _extern_arg(self, v, meta=None) -> ExternArg:
        """`meta`: the traced fake tensor of this argument, whose dense layout a computed value is written in
        (ops size their outputs like their inputs: SDPA's output follows the query's strides, and a query made
        contiguous would come back in another layout than the graph was traced with, costing a copy); a view with
        gaps (a split's channel slice) densely in its own dimension order."""
        if isinstance(v, TensorValue):
            st = v.strided or self.realize(v, stride=stride_in_order_of(meta, v.size)).strided
            assert st is not None  # (size-1 dims' strides as eager's: ATen picks a memory format from them all)
            return ExternArg(buffer=st.buffer, view=(st.size, eager_strides(st.size, st.stride), st.offset))
        if isinstance(v, (list, tuple)) and any(isinstance(x, TensorValue) for x in v):
            metas = meta if isinstance(meta, (list, tuple)) and len(meta) == len(v) else [None] * len(v)
            return ExternArg(items=[self._extern_arg(x, m) for x, m in zip(v, metas)])
        return ExternArg(value=v)

    def _laid_out_for(self, target, i: int, arg, meta):
        """Argument `i` of an op that makes it dense and channels-last before reading it (`_CHANNELS_LAST_ARGUMENTS`),
        realized so by its kernel where it is a view with gaps or a value computed for this call."""
        if i not in _CHANNELS_LAST_ARGUMENTS.get(target, ()) or not isinstance(arg, TensorValue):
            return arg
        if arg.strided is not None and dense_stride(meta, arg.size) is None:
            return self.realize(arg, stride=stride_in_order_of(meta, arg.size))
        if arg.strided is None and channels_last_dense(arg.size) is not None:
            return self.realize(arg, stride=channels_last_dense(arg.size))
        return arg

    def _extern(self, node: torch.fx.Node, reason: str, target=None, args: tuple | None = None):
        """An ATen call for `node` (or, with `target` and `args`, another op giving the same output)."""
        target = target or node.target
        in_place = target in _IN_PLACE_FORMS and args is None and self._computed_for_this_call_alone(node.args[0])
        if in_place:
            target = _IN_PLACE_FORMS[target]
            reason += "; run in place on its input, whose buffer is computed for this call alone"
        if args is None:
            self._share_extern_inputs(node, skip=node.args[0] if in_place else None)
        if not _callable_from_output_code(target):
            raise EagerGraph(f"node {node.name} calls {target_name(target)}, which output_code.py cannot "
                             f"call by name")
        if args is not None:
            kwargs, metas, kwmetas = {}, [None] * len(args), {}
        else:
            args, kwargs = self._args(node)
            metas, kwmetas = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
        args = tuple(self._laid_out_for(target, i, a, metas[i]) for i, a in enumerate(args))
        eargs = [self._extern_arg(a, m) for a, m in zip(args, metas)]
        ekwargs = {k: self._extern_arg(v, kwmetas.get(k)) for k, v in kwargs.items()}
        val = node.meta.get("val")
        name = self.new_name()
        vals = list(val) if isinstance(val, (list, tuple)) else [val]
        outputs, binds = [], []
        for i, m in enumerate(vals):
            oname = f"{name}_{i}" if isinstance(val, (list, tuple)) else name
            try:
                result = f"{name}[{i}]" if isinstance(val, (list, tuple)) else name
                binds += self.symbols.extern_result(result, m)  # (data-dependent sizes: nonzero's, .item()'s)
                outputs.append((oname, m.dtype, Layout(shape_of(m), strides_of(m)))
                               if isinstance(m, torch.Tensor) else None)
            except SymbolicSizeError as e:
                raise DynamicShapeGraph(f"node {node.name}'s result: {e}") from None
        self.nodes.append(ExternCall(name, target_name(target), eargs, ekwargs, outputs, node.name,
                                     reason, is_tuple=isinstance(val, (list, tuple)), binds=binds))
        self.notes.append(ExternNote(node.name, target_name(target), reason).to_line())  # notes.txt
        results = [buffer_value(o[0], o[1], o[2].size, o[2].stride) if o else
                   size_expr(m) if isinstance(m, torch.SymInt) else m for o, m in zip(outputs, vals)]
        return tuple(results) if isinstance(val, (list, tuple)) else results[0]

    def _share_extern_inputs(self, node: torch.fx.Node, skip) -> None:
        """Each input of this call that is not in a buffer yet and that other nodes read too is computed into one
        buffer that all of them read: else every extern call reading it, and the graph output saving it, would
        compute it into a buffer of its own (a ViT training step under autocast cast each weight to bfloat16
        twice: once for its product, once more for the backward; 5.8 ms of its 96)."""
        for arg in node.all_input_nodes:
            value = self.env.get(arg)
            if arg is skip or len(arg.users) < 2 or not isinstance(value, TensorValue) or value.strided is not None \
                    or 0 in value.size:
                continue
            with origin_scope(arg.name):
                self.env[arg] = self.realize(value, stride=dense_stride(arg.meta.get("val"), value.size),
                                             origin=arg.name)

    def _computed_for_this_call_alone(self, arg) -> bool:
        """Whether extern argument `arg` is a value not yet in a buffer: `_extern_arg` computes it into a fresh buffer
        that nothing else reads (later readers compute it again or read another buffer), so the call may
        overwrite it (a functional `index_put` as `index_put_`, instead of copying it first)."""
        value = self.env.get(arg) if isinstance(arg, torch.fx.Node) else None
        return isinstance(value, TensorValue) and value.strided is None and 0 not in value.size
