"""Support code many kernel libraries link, compiled once per toolchain into an object in the cache.

The generated source keeps the full text (output_code.py compiles standalone), but once a part's object is
built, g++ compiles a copy of the source in which the part's definitions are blank lines (diagnostics and
the vectorization report keep their line numbers) and links the object. The fast expf's definitions cost
~25 ms of every softmax-like build. Where g++ runs several at once (compiler/machine/build_parts.py's jobs), the first
build that needs an object compiles it beside its kernels and links it (a masked softmax's cold build here:
121-164 -> 112-118 ms); with one job, like the precompiled prelude (compiler/machine/pch.py), the object is built in
the background after that first build, which compiles the definitions itself.

Objects live in `<cache>/prebuilt/<key>/<name>.o`, keyed by their text, compiler, flags and compiler version.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from compiler import config
from compiler.cpp_text import fast_erf, vector_math
from compiler.machine import pch


@dataclass(frozen=True)
class Part:
    name: str
    definitions: str  # the text generated sources carry, replaced by the object
    source: str  # the object's translation unit


PARTS = (Part("lens_expf", vector_math.FAST_EXP_DEFINITIONS, vector_math.FAST_EXP_OBJECT),
         Part("lens_erff", fast_erf.DEFINITIONS, vector_math.FAST_ERF_OBJECT))


@dataclass
class ObjectBuild:
    """A support object a build compiles itself, beside its kernels: `command` writes `tmp`, which becomes
    `path` once it succeeded; `lock` (pch.claim's) is removed either way."""

    command: list[str]
    tmp: str
    path: str
    lock: str

    def finish(self, ok: bool, log: str) -> None:
        folder = os.path.dirname(self.path)
        try:
            if ok:
                os.replace(self.tmp, self.path)
            else:
                with open(os.path.join(folder, "build.log"), "w") as f:
                    f.write(log)
                open(os.path.join(folder, "failed"), "w").close()
        finally:
            if os.path.exists(self.tmp):
                os.remove(self.tmp)
            os.remove(self.lock)


def split(source: str, cxx: str, flags: list[str], version: str, here: bool = False
          ) -> tuple[str, list[str], list[ObjectBuild]]:
    """What to compile instead of `source`, the objects to link with it, and the objects this build must
    compile first (`here`: when g++ runs several at once, a part not built yet is compiled beside the kernels,
    once for every later build, instead of inside this one's text; else it stays in the text and builds in the
    background). Every part whose object is linked has its definitions blanked."""
    if not config.cpp.prebuilt_objects:
        return source, [], []
    objects, builds = [], []
    for part in PARTS:
        if part.definitions not in source:
            continue
        folder = pch.keyed_folder("prebuilt", part.source, cxx, flags, version)
        obj = os.path.join(folder, f"{part.name}.o")
        src = os.path.join(folder, f"{part.name}.cpp")
        files = {f"{part.name}.cpp": part.source}
        if not os.path.exists(obj):
            lock = pch.claim(folder, files) if here else None
            if lock is None:  # (with `here`: another process is building it, or it failed before)
                if not here:
                    pch.build_in_background(folder, files, [cxx, *flags, "-c", src], obj)
                continue
            tmp = f"{obj}.{os.getpid()}.tmp-out"
            builds.append(ObjectBuild([cxx, *flags, "-c", src, "-o", tmp], tmp, obj, lock))
        source = source.replace(part.definitions, "\n" * part.definitions.count("\n"), 1)
        objects.append(obj)
    return source, objects, builds
