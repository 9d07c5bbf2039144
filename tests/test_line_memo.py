"""`LineMemo`: the per-line values of a line-local pass, each line passed over once, the new
lines of a text together in one pass."""

from __future__ import annotations

from ctxfold._memo import LineMemo


class _Upper:
    """A line-local pass that records each batch of lines it is given."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def __call__(self, lines: list[str]) -> list[str]:
        self.batches.append(list(lines))
        return "\n".join(lines).upper().split("\n")


def test_values_are_each_lines_value_in_order() -> None:
    memo = LineMemo(_Upper())
    assert memo.values("a\nb\n\nc") == ["A", "B", "", "C"]
    assert memo.values("one line") == ["ONE LINE"]
    assert memo.values("") == []


def test_a_line_seen_before_is_not_passed_over_again_and_the_new_lines_go_in_one_batch() -> None:
    """The new lines of a text, wherever they stand among lines seen before and however often
    they repeat, are passed over once each, in one batch."""
    upper = _Upper()
    memo = LineMemo(upper)
    memo.values("a\nb")
    assert memo.values("a\nx\ny\nb\nz\nx") == ["A", "X", "Y", "B", "Z", "X"]
    assert upper.batches == [["a", "b"], ["x", "y", "z"]]
    assert memo.values("z\ny\na") == ["Z", "Y", "A"]
    assert len(upper.batches) == 2


def test_a_batch_that_returns_another_number_of_values_for_lines_among_known_ones() -> None:
    """A batch that miscounts is given each run of new lines on its own, its values used as
    they are and none kept, as when it is given a whole text."""

    def joined(lines: list[str]) -> list[str]:
        return ["+".join(lines)] if len(lines) > 1 else lines

    memo = LineMemo(joined)
    memo.values("k")
    assert memo.values("a\nb\nk\nc\nd") == ["a+b", "k", "c+d"]


def test_long_lines_are_passed_over_every_time_and_the_memo_stays_bounded() -> None:
    upper = _Upper()
    memo = LineMemo(upper, maxsize=2, max_line_chars=5)
    memo.values("long line")
    memo.values("long line")
    assert upper.batches == [["long line"], ["long line"]]
    memo.values("a\nb\nc")  # more lines than maxsize: the memo starts afresh
    memo.values("a")
    assert upper.batches[-1] == ["a"]


def test_a_batch_that_returns_another_number_of_values_is_used_as_is_and_not_kept() -> None:
    calls: list[list[str]] = []

    def joined(lines: list[str]) -> list[str]:
        calls.append(lines)
        return ["+".join(lines)]

    memo = LineMemo(joined)
    assert memo.values("a\nb") == ["a+b"]
    assert memo.values("a\nb") == ["a+b"]
    assert len(calls) == 2


def test_the_new_lines_of_many_texts_are_learned_in_one_batch() -> None:
    """Texts learned together cost one batch for all their new lines (each line once, long
    lines left out); asking for their values afterwards passes over nothing but long lines."""
    upper = _Upper()
    memo = LineMemo(upper, max_line_chars=5)
    memo.values("a")
    memo.learn(["a\nb", "c\nb", "a long line\nd", ""])
    assert upper.batches == [["a"], ["b", "c", "d", ""]]
    assert memo.values("b\nc") == ["B", "C"]
    assert memo.values("d\na long line") == ["D", "A LONG LINE"]
    assert upper.batches[2:] == [["a long line"]]
    memo.learn(["b\nc"])
    assert len(upper.batches) == 3
