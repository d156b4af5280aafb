"""The program the tools' tests run for real: examples/foo1.py's two functions, and the `neg` codegen bug they
reproduce on purpose (an op override recorded in fx_graph_runnable.py)."""

PROGRAM = '''
import torch


def foo1(x1, x2):
    a = torch.neg(x1)
    b = torch.maximum(x2, a)
    y = torch.cat([b], dim=1)
    return y


def scaled_softmax(x, scale):
    s = x * scale
    p = torch.softmax(s, dim=-1)
    return p.sum(dim=0)
'''
NEG_BUG = {"neg": "decltype({x})(2 * {x})"}
