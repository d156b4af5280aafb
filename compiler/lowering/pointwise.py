"""Elementwise lowerings: math, comparison, logical and bitwise ops, where, clamp, casts, fills.

Each op computes in eager's computation dtype (inputs cast first) and yields the output dtype that the
FX node's fake tensor says, so type promotion and integer wrap-around match eager.
"""
from __future__ import annotations

from typing import Sequence

import sympy
import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from compiler.ir.nodes import POLYNOMIAL_OPS, IndexValue, Op
from compiler.ir.size_symbols import FloatSize
from compiler.lowering.registry import register
from compiler.lowering.values import (
    TensorValue,
    UnsupportedLowering,
    broadcast_shapes,
    broadcast_to,
    cast,
    constant,
    origin,
    origin_scope,
)

aten, prims = torch.ops.aten, torch.ops.prims

SUPPORTED_DTYPES = {torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int8, torch.int16,
                    torch.int32, torch.int64, torch.uint8, torch.bool}


def check_dtype(dtype: torch.dtype) -> None:
    if dtype not in SUPPORTED_DTYPES:
        raise UnsupportedLowering(f"dtype {dtype} has no generated code")


def half_scalar(value, dtype: torch.dtype):
    """A Python number as eager holds it where it takes it as a tensor of the result's half dtype (add and sub,
    where, fills: rounded to that dtype; mul and div keep their scalars in float); other dtypes unchanged."""
    if dtype in (torch.bfloat16, torch.float16) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return torch.tensor(float(value)).to(dtype).item()
    return value


def _as_value(x, dtype: torch.dtype) -> TensorValue:
    if isinstance(x, TensorValue):
        return x
    c = constant(x, dtype)
    return TensorValue(dtype, (), lambda idx, c=c: c)


def _probe(x):
    if isinstance(x, TensorValue):
        return torch.empty([1] * len(x.size), dtype=x.dtype) if x.size else torch.empty((), dtype=x.dtype)
    if isinstance(x, sympy.Expr):  # a size symbol's expression: a Python int
        return 1
    if isinstance(x, FloatSize):  # a size as a float
        return 1.0
    return x


def promoted_dtype(*args) -> torch.dtype:
    return elementwise_dtypes(*[_probe(a) for a in args if a is not None],
                              type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)[0]


def elementwise(name: str, args: Sequence, out_dtype: torch.dtype, compute_dtype: torch.dtype | None = None,
                size: Sequence[int] | None = None) -> TensorValue:
    """`name` applied elementwise, broadcasting tensors and Python scalars."""
    compute = compute_dtype or out_dtype
    check_dtype(out_dtype)
    check_dtype(compute)
    for a in args:
        if isinstance(a, TensorValue):
            check_dtype(a.dtype)
    vals = [_as_value(a, compute) for a in args]
    size = tuple(size) if size is not None else broadcast_shapes(*[v.size for v in vals])
    vals = [broadcast_to(v, size) for v in vals]
    org = origin()

    def loader(index):
        with origin_scope(org):
            ops = tuple(cast(v.load(index), compute) for v in vals)
        return Op(out_dtype if name not in COMPARISONS else torch.bool, org, name, ops)

    inlined = frozenset().union(*[v.inlined for v in vals]) | {org}
    result = TensorValue(out_dtype if name not in COMPARISONS else torch.bool, size, loader, None, inlined)
    if result.dtype != out_dtype:
        return to_dtype(result, out_dtype)
    return result


def to_dtype(v: TensorValue, dtype: torch.dtype) -> TensorValue:
    check_dtype(dtype)
    check_dtype(v.dtype)
    if v.dtype == dtype:
        return v
    org = origin()

    def loader(idx):
        with origin_scope(org):
            return cast(v.load(idx), dtype)

    return TensorValue(dtype, v.size, loader, None, v.inlined | {org})


COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "signbit", "logical_not",
               "logical_and", "logical_or", "logical_xor"}

# ops whose computation dtype is the node's output dtype
SAME_DTYPE_OPS = {
    aten.neg: "neg", aten.abs: "abs", aten.exp: "exp", aten.exp2: "exp2", aten.expm1: "expm1",
    aten.log: "log", aten.log2: "log2", aten.log10: "log10", aten.log1p: "log1p", aten.sqrt: "sqrt",
    aten.rsqrt: "rsqrt", aten.sin: "sin", aten.cos: "cos", aten.tan: "tan", aten.asin: "asin",
    aten.acos: "acos", aten.atan: "atan", aten.sinh: "sinh", aten.cosh: "cosh", aten.tanh: "tanh",
    aten.asinh: "asinh", aten.acosh: "acosh", aten.atanh: "atanh", aten.erf: "erf", aten.erfc: "erfc", aten.lgamma: "lgamma",
    aten.floor: "floor", aten.ceil: "ceil", aten.trunc: "trunc", aten.frac: "frac",
    aten.reciprocal: "reciprocal", aten.sigmoid: "sigmoid", aten.sign: "sign", aten.sgn: "sign",
    aten.relu: "relu", aten.bitwise_not: "bitwise_not", aten.mul: "mul", aten.maximum: "maximum",
    aten.minimum: "minimum", aten.fmax: "fmax", aten.fmin: "fmin", aten.atan2: "atan2",
    aten.hypot: "hypot", aten.copysign: "copysign", aten.fmod: "fmod", aten.remainder: "remainder",
    aten.bitwise_and: "bitwise_and", aten.bitwise_or: "bitwise_or", aten.bitwise_xor: "bitwise_xor",
    aten.bitwise_left_shift: "lshift", aten.bitwise_right_shift: "rshift", aten.__lshift__: "lshift",
    aten.__rshift__: "rshift", aten.pow: "pow", aten.nextafter: "nextafter",
    prims.mul: "mul", prims.neg: "neg", prims.abs: "abs", prims.exp: "exp", prims.log: "log",
    prims.sqrt: "sqrt", prims.rsqrt: "rsqrt", prims.maximum: "maximum", prims.minimum: "minimum",
    prims.sin: "sin", prims.cos: "cos", prims.tanh: "tanh", prims.erf: "erf", prims.sub: "sub",
    prims.add: "add", prims.fmod: "fmod", prims.remainder: "remainder", prims.pow: "pow",
}
SAME_DTYPE_OPS.update({getattr(aten, f"special_{name}"): name for name in POLYNOMIAL_OPS})
PROMOTED_OPS = {  # computed in the promoted dtype of the inputs, output bool
    aten.eq: "eq", aten.ne: "ne", aten.lt: "lt", aten.le: "le", aten.gt: "gt", aten.ge: "ge",
    prims.eq: "eq", prims.ne: "ne", prims.lt: "lt", prims.le: "le", prims.gt: "gt", prims.ge: "ge",
}
BOOL_OPS = {  # computed on bools
    aten.logical_and: "logical_and", aten.logical_or: "logical_or", aten.logical_xor: "logical_xor",
    aten.logical_not: "logical_not",
}
TEST_OPS = {aten.isnan: "isnan", aten.isinf: "isinf", aten.isfinite: "isfinite", aten.signbit: "signbit"}

for _op, _name in SAME_DTYPE_OPS.items():
    register(_op)(lambda ctx, *args, _name=_name: elementwise(_name, args, ctx.out_dtype))
for _op, _name in PROMOTED_OPS.items():
    register(_op)(lambda ctx, a, b, _name=_name: elementwise(_name, [a, b], ctx.out_dtype, promoted_dtype(a, b)))
for _op, _name in BOOL_OPS.items():
    register(_op)(lambda ctx, *args, _name=_name: elementwise(_name, args, ctx.out_dtype, torch.bool))
for _op, _name in TEST_OPS.items():
    register(_op)(lambda ctx, a, _name=_name: elementwise(_name, [a], ctx.out_dtype, a.dtype))


@register(aten.add, aten.sub)
def _add_sub(ctx, a, b, alpha=1):
    name = "add" if ctx.node.target.overloadpacket is aten.add else "sub"
    a, b = half_scalar(a, ctx.out_dtype), half_scalar(b, ctx.out_dtype)
    if alpha != 1:
        b = elementwise("mul", [b, alpha], ctx.out_dtype)
    return elementwise(name, [a, b], ctx.out_dtype)


@register(aten.rsub)
def _rsub(ctx, a, b, alpha=1):
    a, b = half_scalar(a, ctx.out_dtype), half_scalar(b, ctx.out_dtype)
    if alpha != 1:
        a = elementwise("mul", [a, alpha], ctx.out_dtype)
    return elementwise("sub", [b, a], ctx.out_dtype)


@register(aten.div, prims.div)
def _div(ctx, a, b, rounding_mode=None):
    out = ctx.out_dtype
    if rounding_mode is None:
        if ctx.node.target.namespace == "prims" and not out.is_floating_point:
            return elementwise("truncdiv", [a, b], out)
        return elementwise("div", [a, b], out)
    if rounding_mode == "trunc" and out in (torch.bfloat16, torch.float16):  # eager truncates the rounded quotient
        quotient = to_dtype(elementwise("div", [a, b], torch.float32), out)
        return elementwise("trunc", [quotient], out)
    return elementwise("floordiv" if rounding_mode == "floor" else "truncdiv", [a, b], out)


@register(aten.addcmul)
def _addcmul(ctx, x, t1, t2, value=1):
    """self + value * t1 * t2 as eager's CPU kernel computes it: (value * t1) * t2 + self contracted into one fma
    (ATen's kernels are built with -mfma), in float for half dtypes, rounded once. Integers keep the decomposition
    (decompositions.py); the decompositions use it where eager's kernels contract a * b + c."""
    out = ctx.out_dtype
    if not out.is_floating_point:
        raise UnsupportedLowering(f"addcmul on {out}")
    compute = torch.float32 if out in (torch.bfloat16, torch.float16) else out
    if value != 1:
        t1 = elementwise("mul", [t1, value], compute)
    return to_dtype(elementwise("fma", [t1, t2, x], compute), out)


@register(aten.floor_divide)
def _floor_divide(ctx, a, b):
    return elementwise("floordiv", [a, b], ctx.out_dtype)


@register(aten.where, prims.where)
def _where(ctx, cond, a, b):
    out = ctx.out_dtype
    for x in (cond, a, b):
        if isinstance(x, TensorValue):
            check_dtype(x.dtype)
    cond_v = _as_value(cond, torch.bool)
    size = broadcast_shapes(cond_v.size, *[x.size for x in (a, b) if isinstance(x, TensorValue)])
    cond_b = broadcast_to(to_dtype(cond_v, torch.bool), size)
    vals = [broadcast_to(_as_value(half_scalar(x, out), out), size) for x in (a, b)]
    org = origin()
    check_dtype(out)

    def loader(index):
        with origin_scope(org):
            return Op(out, org, "where", (cond_b.load(index), cast(vals[0].load(index), out),
                                          cast(vals[1].load(index), out)))

    return TensorValue(out, size, loader, None, cond_b.inlined | vals[0].inlined | vals[1].inlined | {org})


@register(aten.clamp, aten.clamp_min, aten.clamp_max)
def _clamp(ctx, x, lo=None, hi=None):
    op = ctx.node.target.overloadpacket
    if op is aten.clamp_max:
        lo, hi = None, lo
    v = x
    if lo is not None:
        v = elementwise("maximum", [v, lo], ctx.out_dtype)
    if hi is not None:
        v = elementwise("minimum", [v, hi], ctx.out_dtype)
    return to_dtype(v, ctx.out_dtype)


@register(aten._to_copy, prims.convert_element_type, aten.clone, aten.lift_fresh_copy, aten.alias,
          aten.detach, aten.positive, prims.clone)
def _copy(ctx, x, *args, **kwargs):
    if ctx.out_device_is_cpu is False:
        raise UnsupportedLowering("device transfer")
    return to_dtype(x, ctx.out_dtype) if isinstance(x, TensorValue) else x


@register(aten.copy)
def _copy_into(ctx, dst, src, non_blocking=False):
    """aten.copy(self, src): src's values, broadcast to self's shape, in self's dtype (functionalized copy_)."""
    if ctx.out_device_is_cpu is False or not isinstance(dst, TensorValue):
        raise UnsupportedLowering("device transfer or non-tensor destination")
    value = src if isinstance(src, TensorValue) else _as_value(src, dst.dtype)
    return to_dtype(broadcast_to(value, tuple(ctx.out_size)), ctx.out_dtype)


@register(aten.full, aten.scalar_tensor, aten.zeros, aten.ones, aten.full_like, aten.zeros_like,
          aten.ones_like, aten.empty_like, aten.empty, aten.empty_strided, aten.new_zeros, aten.new_ones,
          aten.new_full, aten.new_empty, aten.new_empty_strided, prims.full, aten.fill, aten.empty_permuted)
def _full(ctx, *args, **kwargs):
    op = ctx.node.target.overloadpacket
    value = {aten.ones: 1, aten.ones_like: 1, aten.new_ones: 1}.get(op, 0)
    if op in (aten.full, prims.full):
        value = args[1] if len(args) > 1 else kwargs["fill_value"]
    elif op in (aten.full_like, aten.fill):
        value = args[1] if len(args) > 1 else kwargs.get("fill_value", kwargs.get("value"))
    elif op is aten.new_full:
        value = args[2] if len(args) > 2 else kwargs["fill_value"]
    elif op is aten.scalar_tensor:
        value = args[0]
    if isinstance(value, TensorValue):
        if value.size not in ((), (1,) * len(value.size)):
            raise UnsupportedLowering("fill with a non-scalar tensor")
        zero = [sympy.Integer(0)] * len(value.size)
        src, org, out = value, origin(), ctx.out_dtype

        def loader(idx):
            with origin_scope(org):
                return cast(src.load(zero), out)

        return TensorValue(out, ctx.out_size, loader, None, src.inlined | {org})
    c = constant(half_scalar(value, ctx.out_dtype), ctx.out_dtype)
    check_dtype(ctx.out_dtype)
    return TensorValue(ctx.out_dtype, ctx.out_size, lambda idx: c, None, frozenset({origin()}))


_NUMBERS = (int, float, sympy.Expr, FloatSize)


@register(aten.arange, prims.iota)
def _arange(ctx, *args, **kwargs):
    op = ctx.node.target.overloadpacket
    if op is prims.iota:
        start, step = kwargs.get("start", 0), kwargs.get("step", 1)
    else:
        nums = [a for a in args if isinstance(a, _NUMBERS)]  # (sizes too: a symbol's expression is a number)
        if len(nums) != len(args):
            raise UnsupportedLowering("arange with tensor bounds")
        start, step = (0, 1) if len(nums) == 1 else (nums[0], nums[2] if len(nums) > 2 else 1)
    if not all(isinstance(s, _NUMBERS) for s in (start, step)):
        raise UnsupportedLowering("arange with tensor bounds")
    if any(isinstance(s, FloatSize) for s in (start, step)):
        raise UnsupportedLowering("arange with a float size as a bound")
    out, org = ctx.out_dtype, origin()
    check_dtype(out)
    if not out.is_floating_point:  # eager converts start and step to the integer type first
        start, step = (s if isinstance(s, sympy.Expr) else int(s) for s in (start, step))

        def loader(index):
            return Op(out, org, "identity", (IndexValue(out, org, start + step * index[0]),))
    else:  # eager computes start + step * i in double, then rounds to the output dtype
        def loader(index):
            i = IndexValue(torch.int64, org, index[0])
            with origin_scope(org):
                value = Op(torch.float64, org, "add", (constant(start, torch.float64), Op(
                    torch.float64, org, "mul", (cast(i, torch.float64), constant(step, torch.float64)))))
                return cast(value, out)

    return TensorValue(out, ctx.out_size, loader, None, frozenset({org}))
