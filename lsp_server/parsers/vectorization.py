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


# g++'s phrases (-fopt-info-vec-missed) in a person's words; the first that a reason contains wins.
PLAIN_REASONS = (
    ("not profitable", "g++ judged vector code no faster here"),
    ("complicated access pattern", "its memory reads or writes do not step through memory evenly"),
    ("no vectype for stmt", "a value of the loop has no vector type"),
    ("unsupported data-type", "a value of the loop has no vector type"),
    ("control flow in loop", "the loop body branches"),
    ("number of iterations cannot be computed", "g++ cannot tell how many times the loop runs"),
    ("relevant stmt not supported", "a statement has no vector instruction"),
    ("unsupported use in stmt", "a statement has no vector instruction"),
    ("function call", "it calls a function g++ has no vector version of"),
    ("clobbers memory", "it calls a function g++ has no vector version of"),
    ("data ref analysis failed", "g++ cannot tell where its memory accesses go"),
    ("dependen", "g++ cannot prove its reads and writes do not overlap"),
    ("bad data references", "g++ cannot tell where its memory accesses go"),
)
# Not about the loop that carries the elements: an outer loop's own refusal, the zero-filling of a local buffer.
NOT_A_MISS = ("loop nest containing two or more consecutive inner loops", "__builtin_memset", "outer-loop")
NO_REASON = "couldn't vectorize loop"


def plain_reasons(reasons: list[str]) -> list[str]:
    """g++'s reasons for one loop in plain words (its own words after them); [] when none is about the loop."""
    found = []
    for reason in reasons:
        if any(words in reason for words in NOT_A_MISS) or reason.strip() == NO_REASON:
            continue
        plain = next((words for phrase, words in PLAIN_REASONS if phrase in reason), None)
        text = f"{plain} (g++: {reason.strip().rstrip('.')})" if plain else f"g++: {reason.strip().rstrip('.')}"
        if text not in found:
            found.append(text)
    if not found and any(reason.strip() == NO_REASON for reason in reasons):
        found.append("g++ did not vectorize it and gave no reason")
    return found
