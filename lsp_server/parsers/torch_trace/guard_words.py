"""Dynamo's failed-guard text (`tensor 'x' size mismatch at index 0. expected 8, actual 12`) in plain words for
people ("`x`'s dimension 0 changed: compiled for 8, called with 12"). A table of patterns; text no pattern
knows is returned as it is. Also which failed guards specialized a parameter's size (`size_guards`: the
mark_dynamic quick fix)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

_NAME = r"(?:L\[')?(?P<name>[^'\]\s]+)(?:'\])?"

# pattern -> words (from the match's groups); the first pattern that matches wins
PLAIN_WORDS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (re.compile(rf"tensor '{_NAME}' size mismatch at index (?P<dim>\d+)\. expected (?P<old>\d+), actual (?P<new>\d+)"),
     lambda m: f"`{m['name']}`'s dimension {m['dim']} changed: compiled for {m['old']}, called with {m['new']}"),
    (re.compile(rf"tensor '{_NAME}' stride mismatch at index (?P<dim>\d+)\. expected (?P<old>\d+), actual (?P<new>\d+)"),
     lambda m: f"`{m['name']}`'s stride {m['dim']} changed: compiled for {m['old']}, called with {m['new']} "
               "(another layout: a transpose, a slice)"),
    (re.compile(rf"tensor '{_NAME}' dtype mismatch\. expected (?P<old>\w+), actual (?P<new>\w+)"),
     lambda m: f"`{m['name']}`'s dtype changed: compiled for {m['old']}, called with {m['new']}"),
    (re.compile(rf"tensor '{_NAME}' requires_grad mismatch\. expected requires_grad=(?P<old>\w+)"),
     lambda m: f"`{m['name']}`.requires_grad changed (compiled with {m['old']})"),
    (re.compile(rf"tensor '{_NAME}' (?:device|dispatch key set) mismatch"),
     lambda m: f"`{m['name']}` is on another device or has other dispatch keys"),
    (re.compile(rf"tensor '{_NAME}' rank mismatch\. expected (?P<old>\d+), actual (?P<new>\d+)"),
     lambda m: f"`{m['name']}` has {m['new']} dimensions, compiled for {m['old']}"),
    (re.compile(rf"^{_NAME} == (?P<value>[^\s]+)$"),
     lambda m: f"`{m['name']}` was {m['value']} when compiled: a Python value is part of the guard"),
    (re.compile(rf"___check_type_id\({_NAME}"),
     lambda m: f"`{m['name']}` has another type than when compiled"),
    (re.compile(rf"___check_obj_id\({_NAME}"),
     lambda m: f"`{m['name']}` is another object than when compiled"),
    (re.compile(r"len\(" + _NAME + r"\) == (?P<n>\d+)"),
     lambda m: f"`{m['name']}` has another length (compiled for {m['n']})"),
]


# Dynamo's names for the values a resume function takes from the broken frame's stack: no user wrote them.
STACK_NAME = re.compile(r"`___stack(?P<n>\d+)`(?P<owner>'s)?")


def stack_value(m: re.Match) -> str:
    which = "" if m["n"] == "0" else f" (value {int(m['n']) + 1})"
    return f"the value carried across the graph break{which}" + (": its" if m["owner"] else "")


def plain_words(reason: str) -> str:
    """The guard's failure in words, or the text itself when no pattern knows it."""
    text = reason.strip()
    for pattern, words in PLAIN_WORDS:
        found = pattern.search(text)
        if found:
            return STACK_NAME.sub(stack_value, words(found))
    return text


SIZE_GUARDS = (re.compile(r"tensor '(?:L\[')?(?P<name>\w+)(?:'\])?' size mismatch at index (?P<dim>\d+)"),
               re.compile(r"\bL\['(?P<name>\w+)'\]\.size\(\)\[(?P<dim>\d+)\]"))


@dataclass(frozen=True)
class SizeGuard:
    """A failed guard that specialized dimension `dim` of the compiled function's parameter `name`."""

    name: str
    dim: int


def size_guards(reasons: Sequence[str]) -> list[SizeGuard]:
    """The size specializations among Dynamo's failed guards, each once, in order."""
    found: list[SizeGuard] = []
    for reason in reasons:
        for pattern in SIZE_GUARDS:
            match = pattern.search(reason)
            if match:
                guard = SizeGuard(match["name"], int(match["dim"]))
                if guard not in found:
                    found.append(guard)
                break
    return found
