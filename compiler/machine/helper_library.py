"""The helper libraries of ours that machine/ modules build from C++ source in the background (conv_train.py,
gemm_rows.py, onednn_direct.py, winograd.py): one holder class for building on first need, waiting, loading once and
giving up for good after a failure."""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from compiler import config
from compiler.machine import build, pch


class BackgroundLibrary:
    """A helper library of ours built from C++ source by `background_library` the first time a caller asks for it
    (pch.py; until it is there, callers run ATen's op), then loaded once. `get` gives what `load(path)` made of it (a
    ctypes library or function with its argtypes set), or None: not built yet, or `off` for good once `enabled()`
    says no, `recipe()` gives None (a missing prerequisite; it logs why), the build failed or `load` gave None
    (it logs why). `recipe()` gives the C++ source and the flags to add to build.build_flags()."""

    def __init__(self, kind: str, enabled: Callable[[], bool], recipe: Callable[[], tuple[str, list[str]] | None],
                 load: Callable[[str], Any]):
        self.kind, self._enabled, self._recipe, self._load = kind, enabled, recipe, load
        self.lib: Any = None
        self.path: str | None = None
        self.off = False

    def get(self, wait: bool = False) -> Any:
        """The loaded library (`wait`: build it now if it is not there), else None."""
        if self.lib is not None or self.off:
            return self.lib
        if not self._enabled():
            self.off = True
            return None
        if self.path is None:
            recipe = self._recipe()
            if recipe is None:
                self.off = True
                return None
            source, flags = recipe
            cxx = config.cpp.cxx
            self.path = pch.background_library(self.kind, source, cxx, [*build.build_flags(), *flags],
                                               build.compiler_version(cxx))
        if wait:
            pch.wait_for_builds()
        if not os.path.exists(self.path):
            self.off = pch.build_failed(self.path)
            return None
        self.lib = self._load(self.path)
        self.off = self.lib is None
        return self.lib

    def pending(self) -> bool:
        """Whether the library is still being built (neither loaded nor given up on)."""
        return self.get() is None and not self.off
