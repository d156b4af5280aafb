"""Reads the versioned JSON files of the debug-directory contract (docs/debug-directory.md)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lens_format.errors import ParseError, UnsupportedVersionError

SUPPORTED_MAJOR = 1


@dataclass(frozen=True)
class SourceRef:
    """A user source location as the contract writes it (`source` objects): file, 1-based line, the function
    and the line's code."""

    file: str
    line: int
    function: str = ""
    code: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "function": self.function, "code": self.code}


def read_json_object(path: Path, require_version: bool = True,
                     majors: tuple[int, ...] = (SUPPORTED_MAJOR,)) -> dict[str, Any]:
    """The top-level object of `path`; ParseError on bad JSON, UnsupportedVersionError on a major not in
    `majors` (ours by default; Inductor's own files have their own versions)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ParseError(path, f"cannot read: {exc}") from exc
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        raise ParseError(path, f"invalid JSON: {exc}", line) from exc
    if not isinstance(data, dict):
        raise ParseError(path, "expected a JSON object at top level")
    if require_version or "version" in data:
        check_version(path, data.get("version"), majors)
    return data


def check_version(path: Path, version: Any, majors: tuple[int, ...] = (SUPPORTED_MAJOR,)) -> None:
    """Accept version 1 / "1.x"; reject other majors with a clear message."""
    try:
        major = int(str(version).split(".")[0])
    except ValueError:
        raise UnsupportedVersionError(path, f"missing or malformed 'version' ({version!r})") from None
    if major not in majors:
        raise UnsupportedVersionError(
            path, f"unsupported version {version!r}: this server reads major version "
                  f"{' or '.join(map(str, majors))}"
        )


def as_int(value: Any) -> int | None:
    """An int from JSON, or None for anything else (bools excluded)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def as_float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def as_str(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def as_str_list(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def as_dict_list(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def parse_source_ref(value: Any) -> SourceRef | None:
    """A contract `source` object, or None when absent or unusable."""
    if not isinstance(value, dict):
        return None
    file, line = value.get("file"), as_int(value.get("line"))
    if not isinstance(file, str) or not file or line is None:
        return None
    return SourceRef(file, line, as_str(value.get("function")), as_str(value.get("code")))



def source_ref_json(ref: SourceRef | None) -> dict[str, Any] | None:
    """A contract `source` object (None stays null)."""
    return ref.to_json() if ref is not None else None
