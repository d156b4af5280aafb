"""Kernel Lens compiler: torch.compile(fn, backend="lens") lowers aten graphs to fused C++ kernels.

`compiler.config` is reachable after `import compiler` (as `torch._inductor.config` is after `import torch`);
it imports nothing heavy, so `kernel-lens index` and the language server's jobs start fast."""
from compiler import config

__all__ = ["config"]
