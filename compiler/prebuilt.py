"""Support code many kernel libraries link, compiled once per toolchain into an object in the cache.

The generated source keeps the full text (output_code.py compiles standalone), but once a part's object is
built, g++ compiles a copy of the source in which the part's definitions are blank lines (diagnostics and
the vectorization report keep their line numbers) and links the object. The fast expf's definitions cost
~25 ms of every softmax-like build. Like the precompiled prelude (compiler/pch.py), an object is built in the
background after the first build that needed it, which compiles the definitions itself.

Objects live in `<cache>/prebuilt/<key>/<name>.o`, keyed by their text, compiler, flags and compiler version.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from compiler import config, pch
from compiler.codegen import vector_math


@dataclass(frozen=True)
class Part:
    name: str
    definitions: str  # the text generated sources carry, replaced by the object
    source: str  # the object's translation unit


PARTS = (Part("lens_expf", vector_math.FAST_EXP_DEFINITIONS, vector_math.FAST_EXP_OBJECT),)


def split(source: str, cxx: str, flags: list[str], version: str) -> tuple[str, list[str]]:
    """What to compile instead of `source` and the objects to link with it: every part whose object is built
    has its definitions blanked. Parts not built yet stay in the text and start building."""
    if not config.cpp.prebuilt_objects:
        return source, []
    objects = []
    for part in PARTS:
        if part.definitions not in source:
            continue
        folder = pch.keyed_folder("prebuilt", part.source, cxx, flags, version)
        obj = os.path.join(folder, f"{part.name}.o")
        if os.path.exists(obj):
            source = source.replace(part.definitions, "\n" * part.definitions.count("\n"), 1)
            objects.append(obj)
        else:
            src = os.path.join(folder, f"{part.name}.cpp")
            pch.build_in_background(folder, {f"{part.name}.cpp": part.source}, [cxx, *flags, "-c", src], obj)
    return source, objects
