"""The `tensors/` folder of a graph (`config.save_tensors`): its file names, and whether two saved files hold the
same values bit for bit, answered from the zip members `torch.save` writes without loading them (no torch)."""
from __future__ import annotations

import zipfile
from pathlib import Path

from lens_format.files import TENSORS_INPUTS, TENSORS_OUTPUTS
from lens_format.run_diff import DiffGraph, OutputsDiff

_PER_SAVE = ".data/serialization_id"  # torch.save writes a fresh id into every file


def same_bits(a: Path, b: Path) -> bool | None:
    """True: the two files hold the same tensors (dtype, shape, strides, bytes); None: they may or may not (the
    bytes differ, or a file is missing or not a torch.save zip)."""
    try:
        members = []
        for path in (a, b):
            with zipfile.ZipFile(path) as archive:  # members sit under a folder named after the file
                members.append({name.split("/", 1)[-1]: archive.read(name) for name in archive.namelist()
                                if not name.endswith(_PER_SAVE)})
    except (OSError, zipfile.BadZipFile, KeyError, ValueError):
        return None
    return True if members[0] == members[1] else None


def outputs_by_bytes(ga: DiffGraph, gb: DiffGraph) -> OutputsDiff:
    """The outputs of a diff for a reader that loads no tensors: `same` where both runs saved the same outputs
    from the same inputs, `not_compared` where their bytes differ, `not_saved` where either has none."""
    outputs = [Path(g.path) / TENSORS_OUTPUTS for g in (ga, gb)]
    if not all(p.is_file() for p in outputs):
        return OutputsDiff("not_saved")
    inputs = [Path(g.path) / TENSORS_INPUTS for g in (ga, gb)]
    inputs_same = not all(p.is_file() for p in inputs) or same_bits(*inputs)
    if same_bits(*outputs) and inputs_same:
        return OutputsDiff("same", 0.0, 0.0)
    return OutputsDiff("not_compared")
