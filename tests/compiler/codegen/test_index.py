"""Index simplification is exact over the loop ranges it is given (property test against direct evaluation)."""
import itertools

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._sympy.functions import FloorDiv, ModularIndexing

from compiler.codegen.index import cpp_index, simplify_index

X = [sympy.Symbol(f"x{i}", integer=True, nonnegative=True) for i in range(3)]


def _value(e: sympy.Expr, env: dict) -> int:
    """Python evaluation of an index expression (FloorDiv/ModularIndexing on non-negative operands)."""
    if e.is_Integer:
        return int(e)
    if e.is_Symbol:
        return env[e]
    if isinstance(e, sympy.Add):
        return sum(_value(a, env) for a in e.args)
    if isinstance(e, sympy.Mul):
        out = 1
        for a in e.args:
            out *= _value(a, env)
        return out
    if isinstance(e, FloorDiv):
        return _value(e.args[0], env) // _value(e.args[1], env)
    if isinstance(e, ModularIndexing):
        return (_value(e.args[0], env) // _value(e.args[1], env)) % _value(e.args[2], env)
    if isinstance(e, sympy.Min):
        return min(_value(a, env) for a in e.args)
    if isinstance(e, sympy.Max):
        return max(_value(a, env) for a in e.args)
    raise TypeError(e)


@st.composite
def index_exprs(draw):
    sizes = [draw(st.sampled_from([1, 2, 3, 4, 6, 8, 16])) for _ in X]
    linear = sum((draw(st.sampled_from([0, 1, 2, 3, 4, 8, 16, 64])) * v for v in X), sympy.Integer(0))
    linear += draw(st.integers(0, 5))
    d = draw(st.sampled_from([1, 2, 3, 4, 8, 16, 32]))
    m = draw(st.sampled_from([1, 2, 3, 4, 8, 64]))
    kind = draw(st.sampled_from(["div", "mod", "sum", "split", "clamp"]))
    if kind == "clamp":  # a pad's or concatenation's in-bounds clamp (lowering/concat.py)
        e = sympy.Max(0, sympy.Min(linear - draw(st.integers(0, 4)), draw(st.integers(0, 70)))) + X[1]
    elif kind == "split":  # a dimension split in two and read whole (codegen/index.py's _rejoin)
        c = draw(st.sampled_from([1, 3, 8]))
        e = c * m * FloorDiv(linear, d * m) + c * ModularIndexing(linear, d, m) + draw(st.sampled_from([0, 1])) * X[2]
    elif kind == "div":
        e = FloorDiv(linear, d)
    elif kind == "mod":
        e = ModularIndexing(linear, d, m)
    else:
        e = 5 * ModularIndexing(linear, d, m) + 7 * FloorDiv(linear, d) + X[0]
    return e, dict(zip(X, sizes))


@settings(max_examples=300, deadline=None)
@given(index_exprs())
def test_simplified_index_equals_original_everywhere(case):
    e, ranges = case
    s = simplify_index(e, ranges)
    cpp_index(s)  # still printable
    for point in itertools.product(*(range(ranges[v]) for v in X)):
        env = dict(zip(X, point))
        assert _value(s, env) == _value(e, env), (e, s, env)


def test_view_copy_index_becomes_contiguous_in_the_inner_var():
    x0, x1 = X[:2]
    e = ModularIndexing(x1, 1, 512) + 131072 * ModularIndexing(512 * x0 + x1, 512, 8) + \
        512 * ModularIndexing(512 * x0 + x1, 4096, 256)
    assert cpp_index(simplify_index(e, {x0: 2048, x1: 512})) == "x1 + 512*(x0 / 8) + 131072*(x0 % 8)"


def test_a_split_dimension_read_whole_is_linear_again():
    x0, x1 = X[:2]
    # relu over a Linear's (2048, 2048) output viewed as (8, 256, 2048): the row index split and joined
    e = x1 + 524288 * FloorDiv(x0, 256) + 2048 * ModularIndexing(x0, 1, 256)
    assert simplify_index(e, {x0: 2048, x1: 2048}) == 2048 * x0 + x1
    # three levels and a common coefficient join in steps; what is not a split of the same index stays
    f = 3 * (32 * FloorDiv(x0, 32) + 8 * ModularIndexing(x0, 8, 4) + ModularIndexing(x0, 1, 8)) + \
        5 * ModularIndexing(x0, 1, 3) + 7 * FloorDiv(x1, 4) + ModularIndexing(x1, 1, 4)
    s = simplify_index(f, {x0: 200, x1: 30})
    assert cpp_index(s) == "3*x0 + 7*(x1 / 4) + 5*(x0 % 3) + (x1 % 4)"
    for a, b in itertools.product(range(200), range(30)):
        env = {x0: a, x1: b}
        assert _value(s, env) == _value(f, env)


def test_a_modulo_over_a_split_of_its_divisor_keeps_the_inner_var_contiguous():
    x1, x2 = X[1:3]
    # an attention head's columns of a (tokens, 512) projection: (64*head + e) % 512 with e < 64
    e = ModularIndexing(64 * x1 + x2, 1, 512)
    s = simplify_index(e, {x1: 64, x2: 64})
    assert cpp_index(s) == "x2 + 64*(x1 % 8)"
    # the remainder reaching past the split's step keeps the modulo whole
    f = ModularIndexing(64 * x1 + x2, 1, 512)
    assert simplify_index(f, {x1: 64, x2: 65}).has(ModularIndexing)
    for ranges, expr in (({x1: 64, x2: 64}, e), ({x1: 64, x2: 65}, f)):
        s = simplify_index(expr, ranges)
        for a, b in itertools.product(range(ranges[x1]), range(ranges[x2])):
            env = {x1: a, x2: b}
            assert _value(s, env) == _value(expr, env)


@settings(max_examples=200, deadline=None)
@given(index_exprs(), st.integers(0, 15), st.integers(1, 16))
def test_simplified_index_equals_original_in_one_range_of_a_split_loop(case, start, length):
    """A range [start, end) of a split loop (codegen/cpp.py's `_in_range`): the clamps it decides fold, exactly."""
    e, ranges = case
    ranges = {**ranges, X[0]: (start, start + length)}
    s = simplify_index(e, ranges)
    cpp_index(s)
    spans = [range(*ranges[v]) if isinstance(ranges[v], tuple) else range(ranges[v]) for v in X]
    for point in itertools.product(*spans):
        env = dict(zip(X, point))
        assert _value(s, env) == _value(e, env), (e, s, env)


def test_a_clamp_the_loop_range_decides_is_dropped():
    x0, x2 = X[0], X[2]
    clamped = sympy.Min(63, x2) + 21504 * sympy.Max(0, sympy.Min(111, x0 - 1))
    assert simplify_index(clamped, {x0: 115, x2: 64}) == x2 + 21504 * sympy.Max(0, sympy.Min(111, x0 - 1))
    assert simplify_index(sympy.Max(0, sympy.Min(111, x0 - 1)), {x0: (1, 113)}) == x0 - 1
    assert simplify_index(sympy.Max(0, x0 - 64), {x0: (0, 64)}) == 0
