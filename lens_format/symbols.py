"""`symbols.json`: Dynamo's size symbols of a dynamic-shape graph — where each was read (`L['x'].size()[0]`),
its range, its example value and the guards on it. Malformed entries are skipped by readers."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lens_format.jsonio import as_dict_list, as_int, as_str, as_str_list, read_json_object

VERSION = 1
_SOURCE = re.compile(r"^L\['(?P<arg>[^']+)'\](?P<rest>.*)$")
_DIM = re.compile(r"\.size\(\)\[(?P<dim>\d+)\]|\.stride\(\)\[(?P<stride>\d+)\]")


@dataclass(frozen=True)
class ShapeSymbol:
    name: str  # s77, u0: as the graph's files write it
    source: str  # where Dynamo read it ("" for a data-dependent size: null in the file)
    low: int | None  # inclusive range; None: unbounded
    high: int | None
    hint: int | None  # the example value it was traced with
    guards: tuple[str, ...] = ()  # the ShapeEnv's guards that mention it

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source or None, "range": [self.low, self.high], "hint": self.hint,
                "guards": list(self.guards)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ShapeSymbol:
        bounds = d.get("range") if isinstance(d.get("range"), list) else []
        low = as_int(bounds[0]) if len(bounds) > 0 else None
        high = as_int(bounds[1]) if len(bounds) > 1 else None
        return cls(as_str(d.get("name")), as_str(d.get("source")), low, high, as_int(d.get("hint")),
                   tuple(as_str_list(d.get("guards"))))

    @property
    def range_text(self) -> str:
        low = "-∞" if self.low is None else str(self.low)
        high = "∞)" if self.high is None else f"{self.high}]"
        return f"[{low}, {high}"

    @property
    def described(self) -> str:
        """`dimension 0 of \\`x\\``, from the source Dynamo read it at, or the source itself."""
        found = _SOURCE.match(self.source)
        dim = _DIM.search(found["rest"]) if found else None
        if found is None or dim is None:
            return f"`{self.source}`" if self.source else f"`{self.name}`"
        what = "batch dimension" if dim["dim"] == "0" else f"dimension {dim['dim']}" if dim["dim"] else \
            f"stride {dim['stride']}"
        return f"{what} of `{found['arg']}`"


@dataclass
class SymbolTable:
    """The whole file: symbols sorted by name."""

    symbols: list[ShapeSymbol] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"version": VERSION, "symbols": [s.to_json() for s in sorted(self.symbols, key=lambda s: s.name)]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SymbolTable:
        return cls([ShapeSymbol.from_json(d) for d in as_dict_list(data.get("symbols"))
                    if isinstance(d.get("name"), str) and d["name"]])


def read_symbols(path: Path) -> list[ShapeSymbol]:
    """ParseError / UnsupportedVersionError (naming the file) on a file that is not symbols.json."""
    return SymbolTable.from_json(read_json_object(path)).symbols
