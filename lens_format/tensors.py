"""The `tensors/` folder of a graph (`config.save_tensors`): `manifest.json` (what was saved, what the size cap
skipped) as a record, and whether two saved files hold the same values bit for bit, answered from the zip members
`torch.save` writes without loading them (no torch)."""
from __future__ import annotations

import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lens_format.files import TENSORS_INPUTS, TENSORS_OUTPUTS
from lens_format.jsonio import as_dict_list, as_int, as_str, read_json_object
from lens_format.run_diff import DiffGraph, OutputsDiff

MANIFEST_VERSION = 1
KERNEL_VALUES = "eager FX values at each kernel's boundary, run on inputs.pt"


@dataclass
class SavedFile:
    file: str  # relative to the graph folder
    what: str
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "what": self.what, "bytes": self.bytes}


@dataclass
class SkippedFile:
    file: str
    what: str
    bytes: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "what": self.what, "bytes": self.bytes, "reason": self.reason}


@dataclass
class TensorManifest:
    """`tensors/manifest.json`: what was saved and what the size cap skipped."""

    graph_id: str
    max_bytes: int
    kernel_values: str = KERNEL_VALUES
    files: list[SavedFile] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"version": MANIFEST_VERSION, "graph_id": self.graph_id, "max_bytes": self.max_bytes,
                "kernel_values": self.kernel_values, "files": [f.to_json() for f in self.files],
                "skipped": [s.to_json() for s in self.skipped]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorManifest:
        """Entries without a file name are skipped."""
        return cls(as_str(data.get("graph_id")), as_int(data.get("max_bytes")) or 0, as_str(data.get("kernel_values")),
                   [SavedFile(as_str(f.get("file")), as_str(f.get("what")), as_int(f.get("bytes")) or 0)
                    for f in as_dict_list(data.get("files")) if as_str(f.get("file"))],
                   [SkippedFile(as_str(f.get("file")), as_str(f.get("what")), as_int(f.get("bytes")) or 0,
                                as_str(f.get("reason"))) for f in as_dict_list(data.get("skipped")) if as_str(f.get("file"))])


def read_manifest(path: Path) -> TensorManifest:
    """ParseError / UnsupportedVersionError (naming the file) on a file that is not tensors/manifest.json."""
    return TensorManifest.from_json(read_json_object(path))

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
