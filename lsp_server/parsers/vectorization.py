"""`vectorization.txt`: the loops g++ left scalar, as `kernel:LINE: reason  | code` (LINE an output_code.py
line; `# ` lines are comments). Lines that do not have this shape are skipped, never fatal."""
from __future__ import annotations

import re
from pathlib import Path

_LINE = re.compile(r"^(?P<kernel>[A-Za-z_]\w*):(?P<line>\d+): (?P<reason>.*?)(?:  \| .*)?$")


def parse_vectorization_text(text: str) -> dict[int, list[str]]:
    """output_code.py line -> g++'s reasons for not vectorizing the loop there (in order, deduplicated)."""
    out: dict[int, list[str]] = {}
    for raw in text.splitlines():
        m = None if raw.startswith("#") else _LINE.match(raw.strip())
        if m is None:
            continue
        reasons = out.setdefault(int(m["line"]), [])
        if m["reason"] not in reasons:
            reasons.append(m["reason"])
    return out


def parse_vectorization(path: Path) -> dict[int, list[str]]:
    return parse_vectorization_text(path.read_text(errors="replace"))
