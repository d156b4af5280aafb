"""A command's answer that is JSON already (plain dicts, lists, strings, numbers): sent without cattrs.

pygls unstructures a response through cattrs, one call per element of every nested dict and list (~3 ms for a
kernel view's links); the server's converter passes a `JsonAnswer` through as it is (`json_converter`).
"""
from __future__ import annotations

from typing import Callable

import cattrs


class JsonAnswer(dict):
    """A JSON object answered as it is: only dicts, lists, str, int, float, bool and None inside."""


def json_converter(make_default: Callable[[], cattrs.Converter]) -> Callable[[], cattrs.Converter]:
    """pygls's converter factory, with `JsonAnswer` sent untouched."""
    def factory() -> cattrs.Converter:
        converter = make_default()
        converter.register_unstructure_hook(JsonAnswer, lambda answer: answer)
        return converter
    return factory
