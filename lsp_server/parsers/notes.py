"""Parses `notes.txt` (ATen fallbacks and eager graphs, one a line) through the format package."""
from __future__ import annotations

from lens_format.notes import EagerNote, ExternNote, GraphNotes, read_notes

parse_notes = read_notes
parse_notes_text = GraphNotes.from_text
__all__ = ["EagerNote", "ExternNote", "GraphNotes", "parse_notes", "parse_notes_text"]
