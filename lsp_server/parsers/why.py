"""Parses `why.json` (the compiler's decisions about one graph's nodes) through the format package."""
from __future__ import annotations

from lens_format.why import KINDS, WhyFile, WhyFix, WhyRecord, read_why

parse_why = read_why
parse_why_object = WhyFile.from_json
__all__ = ["KINDS", "WhyFile", "WhyFix", "WhyRecord", "parse_why", "parse_why_object"]
