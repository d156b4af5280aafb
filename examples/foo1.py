"""The bundled example: the Inductor CPU debugging tutorial's `foo1`, plus a softmax-style block.

Run it with `kernel-lens compile examples/foo1.py` (or `make demo`), then open this folder in VS Code
with the Kernel Lens extension and hover `foo1`.
"""
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


if __name__ == "__main__":
    torch.manual_seed(0)
    x1 = torch.randint(0, 256, (1, 8), dtype=torch.uint8)
    x2 = torch.randint(0, 256, (8390, 8), dtype=torch.uint8)
    compiled_foo1 = torch.compile(foo1, backend="lens")
    assert torch.equal(compiled_foo1(x1, x2), foo1(x1, x2))

    x = torch.randn(512, 256)
    compiled_softmax = torch.compile(scaled_softmax, backend="lens")
    torch.testing.assert_close(compiled_softmax(x, 0.5), scaled_softmax(x, 0.5))
    print("foo1 and scaled_softmax match eager")
