"""Errors the parsers raise: each names the file (and line, where known) it concerns."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class ParseError(Exception):
    """A file could not be read as its format; `line` is 1-based or None."""

    path: Path
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else str(self.path)
        return f"{where}: {self.message}"


@dataclass
class UnsupportedVersionError(ParseError):
    """A versioned JSON file whose major version this server does not understand."""
