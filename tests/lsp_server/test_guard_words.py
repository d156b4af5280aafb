"""Failed guards in plain words (recompile diagnostics and hovers): each pattern of the table, and text no
pattern knows left as it is."""
import pytest

from lsp_server.parsers.torch_trace.guard_words import SizeGuard, plain_words, size_guards


@pytest.mark.parametrize("guard, words", [
    ("tensor 'a' size mismatch at index 0. expected 10, actual 12",
     "`a`'s dimension 0 changed: compiled for 10, called with 12"),
    ("tensor 'L['x']' stride mismatch at index 1. expected 1, actual 8",
     "`x`'s stride 1 changed: compiled for 1, called with 8 (another layout: a transpose, a slice)"),
    ("tensor 'x' dtype mismatch. expected Float, actual Double", "`x`'s dtype changed: compiled for Float, called with Double"),
    ("tensor 'x' requires_grad mismatch. expected requires_grad=0", "`x`.requires_grad changed (compiled with 0)"),
    ("tensor 'x' rank mismatch. expected 2, actual 3", "`x` has 3 dimensions, compiled for 2"),
    ("L['n'] == 3", "`n` was 3 when compiled: a Python value is part of the guard"),
    ("___check_type_id(L['x'], 94125)", "`x` has another type than when compiled"),
    ("len(L['xs']) == 2", "`xs` has another length (compiled for 2)"),
    ("Ne(s0, 1)  # some new guard", "Ne(s0, 1)  # some new guard"),
])
def test_plain_words(guard: str, words: str) -> None:
    assert plain_words(guard) == words


def test_size_guards_are_the_size_specializations_each_once():
    reasons = ["0/0: tensor 'L['x']' size mismatch at index 0. expected 10, actual 12",
               "0/1: tensor 'x' size mismatch at index 0. expected 12, actual 14",
               "0/0: tensor 'y' stride mismatch at index 1. expected 1, actual 8",
               "0/0: L['w'].size()[1] == 4"]
    assert size_guards(reasons) == [SizeGuard("x", 0), SizeGuard("w", 1)]


def test_dynamos_stack_names_never_reach_the_user():
    """A resume function's inputs are named `___stack0`… by Dynamo: the words say what they are."""
    words = plain_words("tensor '___stack0' size mismatch at index 0. expected 4, actual 5")
    assert words == "the value carried across the graph break: its dimension 0 changed: compiled for 4, called with 5"
    assert "___stack" not in plain_words("tensor '___stack1' dtype mismatch. expected float32, actual float64")
