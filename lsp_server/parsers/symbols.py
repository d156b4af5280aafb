"""`symbols.json`: Dynamo's size symbols of a dynamic-shape graph — where each was read (`L['x'].size()[0]`),
its range, its example value and its guards. Malformed entries are skipped."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lens_format.jsonio import as_dict_list, as_int, as_str, as_str_list, read_json_object

_SOURCE = re.compile(r"^L\['(?P<arg>[^']+)'\](?P<rest>.*)$")
_DIM = re.compile(r"\.size\(\)\[(?P<dim>\d+)\]|\.stride\(\)\[(?P<stride>\d+)\]")


@dataclass(frozen=True)
class ShapeSymbol:
    name: str
    source: str
    low: int | None
    high: int | None  # None: unbounded
    hint: int | None
    guards: tuple[str, ...] = ()

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


def parse_symbols_object(data: dict) -> list[ShapeSymbol]:
    out = []
    for entry in as_dict_list(data.get("symbols")):
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            continue
        bounds = entry.get("range") if isinstance(entry.get("range"), list) else []
        low, high = (as_int(bounds[0]) if len(bounds) > 0 else None), (as_int(bounds[1]) if len(bounds) > 1 else None)
        out.append(ShapeSymbol(name, as_str(entry.get("source")), low, high, as_int(entry.get("hint")),
                               tuple(as_str_list(entry.get("guards")))))
    return out


def parse_symbols(path: Path) -> list[ShapeSymbol]:
    return parse_symbols_object(read_json_object(path))
