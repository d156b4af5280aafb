"""Parses `symbols.json` (Dynamo's size symbols of a dynamic-shape graph) through the format package."""
from __future__ import annotations

from lens_format.symbols import ShapeSymbol, SymbolTable, read_symbols

parse_symbols = read_symbols


def parse_symbols_object(data: dict) -> list[ShapeSymbol]:
    return SymbolTable.from_json(data).symbols


__all__ = ["ShapeSymbol", "parse_symbols", "parse_symbols_object"]
