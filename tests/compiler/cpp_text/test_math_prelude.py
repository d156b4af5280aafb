"""The prelude's stand-ins for <limits> and <type_traits> (compiler/cpp_text/math_prelude.py) give the
values the real headers give, for every C++ type kernels use."""
import ctypes

import pytest
import torch

from compiler.codegen.cpp_ops import CTYPES, PRELUDE
from compiler.machine.build import build_shared_library

INTS = [torch.bool, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
FLOATS = [torch.float32, torch.float64]
INT_FIELDS = ("min", "max", "lowest")
FLOAT_FIELDS = ("min", "max", "lowest", "epsilon", "denorm_min", "infinity", "quiet_NaN")


@pytest.fixture(scope="module")
def limits():
    body = ["static_assert(std::is_same_v<std::make_unsigned_t<int64_t>, uint64_t>);",
            "static_assert(std::is_same_v<std::make_unsigned_t<int8_t>, uint8_t>);",
            "static_assert(std::is_floating_point_v<double> && !std::is_floating_point_v<int32_t>);",
            "static_assert(!std::is_same_v<float, double>);"]
    fns = []
    for dtype in INTS + FLOATS:
        t = CTYPES[dtype]
        fields = FLOAT_FIELDS if dtype.is_floating_point else INT_FIELDS
        kind = "double" if dtype.is_floating_point else "long long"
        name = f"limits_{str(dtype).split('.')[1]}"
        vals = ", ".join(f"({kind})std::numeric_limits<{t}>::{f}()" for f in fields)
        body.append(f'extern "C" void {name}({kind}* out) {{ {kind} v[] = {{{vals}}}; '
                    f"for (unsigned i = 0; i < sizeof(v) / sizeof(v[0]); i++) out[i] = v[i]; }}")
        fns.append(name)
    lib = ctypes.CDLL(build_shared_library(PRELUDE + "\n".join(body) + "\n", "limits_test"))

    def get(dtype):
        fields = FLOAT_FIELDS if dtype.is_floating_point else INT_FIELDS
        ctype = ctypes.c_double if dtype.is_floating_point else ctypes.c_longlong
        out = (ctype * len(fields))()
        getattr(lib, f"limits_{str(dtype).split('.')[1]}")(out)
        return dict(zip(fields, list(out)))
    return get


@pytest.mark.parametrize("dtype", INTS)
def test_integer_limits(limits, dtype):
    got = limits(dtype)
    info = (0, 1) if dtype == torch.bool else (torch.iinfo(dtype).min, torch.iinfo(dtype).max)
    assert (got["min"], got["max"], got["lowest"]) == (info[0], info[1], info[0])


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_limits(limits, dtype):
    got, info = limits(dtype), torch.finfo(dtype)
    assert got["min"] == info.tiny and got["max"] == info.max and got["lowest"] == info.min
    assert got["epsilon"] == info.eps and got["denorm_min"] == (2.0 ** -149 if dtype == torch.float32 else 2.0 ** -1074)
    assert got["infinity"] == float("inf") and got["quiet_NaN"] != got["quiet_NaN"]
