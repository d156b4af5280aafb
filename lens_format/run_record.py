"""`lens/run.json`: the process that wrote a run folder, and its rank in a distributed job (DDP, FSDP: each rank a
process of its own, with a run folder of its own), so that the editor tells the ranks' runs apart."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lens_format.jsonio import as_int, as_str, read_json_object

VERSION = 1
FILE = "run.json"  # in the run folder's `lens/`, beside the graphs' folders


@dataclass
class RunRecord:
    pid: int | None
    rank: int | None = None  # None outside a process group
    world_size: int | None = None
    backend: str = ""  # the process group's ("gloo", "nccl")
    path: Path | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "pid": self.pid, "rank": self.rank, "world_size": self.world_size,
                "backend": self.backend or None}

    @classmethod
    def from_json(cls, data: dict[str, Any], path: Path | None = None) -> RunRecord:
        return cls(as_int(data.get("pid")), as_int(data.get("rank")), as_int(data.get("world_size")),
                   as_str(data.get("backend")), path)

    def rank_label(self) -> str:
        return rank_label(self.rank, self.world_size)


def rank_label(rank: int | None, world_size: int | None) -> str:
    """"rank 1 of 2" (what the editor calls a rank's run), or "" outside a process group."""
    if rank is None:
        return ""
    return f"rank {rank} of {world_size}" if world_size else f"rank {rank}"


def read_run_record(path: Path) -> RunRecord:
    """ParseError / UnsupportedVersionError (naming the file) on a file that is not run.json."""
    return RunRecord.from_json(read_json_object(path), path)
