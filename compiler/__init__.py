"""Kernel Lens compiler: torch.compile(fn, backend="lens") lowers aten graphs to fused C++ kernels."""
