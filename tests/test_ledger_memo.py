"""A work ledger is rendered again at every compaction, from ledgers merged onto the ones the
compactions before worked out; what is remembered between renders (files and errors folded on
from an earlier ledger, entries, checkpoint text of ledger parts) gives the same ledgers, the
same sections and the same checkpoints as working everything out afresh."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import cast

import pytest

from ctxfold.compactor import Compactor
from ctxfold.messages import Message, ToolCall
from ctxfold.session.checkpoint import encode
from ctxfold.storage import MemoryStore
from ctxfold.summarizers.ledger import Ledger, build_ledger, from_data, merge, render, to_data
from ctxfold.testing.transcripts import generate
from ctxfold.tokens import Budget
from ctxfold.tokens import counter as make_counter

COUNTER = make_counter("heuristic")


def _pairs(messages: Sequence[Message], first: int = 1) -> list[tuple[int, Message]]:
    return list(enumerate(messages, start=first))


def _fresh(ledger: Ledger) -> Ledger:
    """An equal ledger that shares nothing worked out with `ledger`."""
    return from_data(json.loads(json.dumps(to_data(ledger))))


def _by_words(text: str) -> int:
    return len(text.split()) + text.count("`")


_RENDER = """
import json, sys
from ctxfold.summarizers.identifiers import approximate_tokens
from ctxfold.summarizers.ledger import from_data, render
def by_words(text):
    return len(text.split()) + text.count("`")
counts = {"default": approximate_tokens, "words": by_words}
cases = json.load(sys.stdin)
json.dump([render(from_data(data), budget, counts[by]) for data, budget, by in cases], sys.stdout)
"""


def _rendered_afresh(cases: Sequence[tuple[Ledger, int]], by: str = "default") -> list[str]:
    """Each ledger rendered at its budget by a new process, which remembers nothing, counting
    tokens as `render` does by default, or as `_by_words` does."""
    data = json.dumps([(to_data(ledger), budget, by) for ledger, budget in cases])
    done = subprocess.run(
        [sys.executable, "-c", _RENDER], input=data, capture_output=True, text=True, check=True
    )
    return cast(list[str], json.loads(done.stdout))


def _chained(pairs: Sequence[tuple[int, Message]], cuts: Sequence[int]) -> Ledger:
    """The ledger of `pairs`, merged one message at a time onto ledgers of the stretches
    between `cuts`, each worked out as a summary's is before the next is merged onto it."""
    ledger = Ledger()
    start = 0
    for cut in [*cuts, len(pairs)]:
        for pair in pairs[start:cut]:
            ledger = merge(ledger, build_ledger([pair]))
        ledger = ledger.folded()
        start = cut
    return ledger


@pytest.mark.parametrize("seed", [3, 7, 11])
def test_files_and_errors_folded_on_are_those_of_the_whole_log(seed: int) -> None:
    """A ledger merged onto ledgers already worked out lists the same files and errors as the
    ledger of the whole log built at once, cut anywhere (between a call and its result too)."""
    pairs = _pairs(generate(seed=seed, steps=60))
    whole = build_ledger(pairs)
    for cuts in ([], [1], [7, 8, 9], list(range(5, len(pairs), 13)), [len(pairs) // 2]):
        chained = _chained(pairs, cuts)
        assert chained == whole
        assert chained.files() == _fresh(whole).files()
        assert chained.errors() == _fresh(whole).errors()


def test_a_result_that_answers_a_call_folded_before_it_changes_the_files() -> None:
    """A failed edit whose result arrives after its call was worked out does not count as a
    write, and its error is listed: the fold starts again where the result changed a call."""
    call = Message(
        "assistant", "", (ToolCall("c1", "bash", '{"command": "sed -i s/a/b/ parser.py"}'),)
    )
    first = build_ledger([(1, Message("user", "Fix the parser.")), (2, call)]).folded()
    assert [f.status for f in first.files()] == ["modified"]
    failed = build_ledger(
        [(3, Message("tool", "<returncode>2</returncode>\nno such file", tool_call_id="c1"))]
    )
    merged = merge(first, failed)
    assert merged.files() == _fresh(merged).files() == ()
    assert merged.errors() == _fresh(merged).errors()
    assert len(merged.errors()) == 1


def test_a_ledger_merged_onto_one_with_no_command_is_the_other_one() -> None:
    """The task before a summary's ledger adds no command: the merged ledger has that ledger's
    files, errors and open file, as reading the whole log gives them."""
    pairs = _pairs(generate(seed=5, steps=40))
    task, rest = build_ledger(pairs[:1]), _chained(pairs[1:], [10, 20])
    assert not task.commands
    merged = merge(task, rest)
    whole = build_ledger(pairs)
    assert merged == whole
    assert merged.files() == whole.files()
    assert merged.errors() == whole.errors()
    assert merged.open_file() == whole.open_file()


@pytest.mark.parametrize("budget", [60, 150, 400, 1_000, 4_000])
def test_a_section_is_the_same_however_its_ledger_was_put_together(budget: int) -> None:
    """Rendering each ledger of a session as it grows, every one merged onto the one before
    (whose files, errors and entries it shares), gives the text each ledger read afresh gives."""
    pairs = _pairs(generate(seed=9, steps=80))
    ledger = Ledger()
    cases: list[tuple[Ledger, int]] = []
    texts = []
    for end, pair in enumerate(pairs, start=1):
        ledger = merge(ledger, build_ledger([pair]))
        if end % 9 == 0 or end == len(pairs):
            ledger = ledger.folded()
            cases.append((ledger, budget))
            texts.append(render(ledger, budget))
    assert texts == _rendered_afresh(cases)


def _edit(seq: int, call: str, command: str, code: int) -> list[tuple[int, Message]]:
    arguments = json.dumps({"command": command})
    return [
        (seq, Message("assistant", "", (ToolCall(call, "bash", arguments),))),
        (seq + 1, Message("tool", f"<returncode>{code}</returncode>", tool_call_id=call)),
    ]


def test_the_newest_file_and_error_go_first_in_each_render_alone() -> None:
    """The newest changed file and the newest open error are kept before anything else; a
    file or error that was newest at an earlier render is not, in a later one that shares it."""
    task = (1, Message("user", "Fix both."))
    first = build_ledger(
        [task, *_edit(2, "c1", "sed -i s/a/b/ a.py", 0), *_edit(4, "c2", "make lint", 2)]
    ).folded()
    second = merge(
        first,
        build_ledger(_edit(6, "c3", "sed -i s/a/b/ b.py", 0) + _edit(8, "c4", "make docs", 2)),
    )
    texts = []
    for budget in range(20, 240, 4):
        render(first, budget)
        texts.append(render(second, budget))
    assert texts == _rendered_afresh([(second, budget) for budget in range(20, 240, 4)])


def test_a_render_weighs_entries_with_its_own_counter() -> None:
    """Renders of ledgers that share entries, with one counter and then another, each find
    the lengths their own counter gives."""
    pairs = _pairs(generate(seed=21, steps=50))
    ledgers = [_chained(pairs[:cut], [cut // 3]) for cut in (40, 70, len(pairs))]
    cases = [(ledger, budget) for ledger in ledgers for budget in (120, 500)]
    default, words = [], []
    for ledger, budget in cases:
        default.append(render(ledger, budget))
        words.append(render(ledger, budget, _by_words))
    assert default == _rendered_afresh(cases)
    assert words == _rendered_afresh(cases, "words")
    assert default != words


def test_renders_from_several_threads_agree() -> None:
    """Compactors in several threads render ledgers that share their values: each gets the
    text one thread alone gets."""
    pairs = _pairs(generate(seed=13, steps=60))
    ledgers = [_chained(pairs[:cut], [cut // 2]) for cut in range(20, len(pairs), 7)]
    expected = _rendered_afresh([(ledger, 300) for ledger in ledgers])
    found: list[list[str]] = []

    def work() -> None:
        found.append([render(ledger, 300) for ledger in ledgers for _ in range(3)][::3])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == [expected] * 4


def test_a_checkpoint_of_ledgers_in_parts_is_one_json_text() -> None:
    """Summaries whose ledgers are kept in parts are written to the checkpoint as the JSON
    the parts make, part texts reused from checkpoint to checkpoint."""
    session = MemoryStore().session("m", checkpoint_every=None)
    compactor = Compactor(Budget(window=6_000), counter=COUNTER)
    texts = []
    for message in generate(seed=7, steps=150):
        session.append(message)
        if message.role == "assistant" and compactor.maybe_compact(session) is not None:
            texts.append(encode(session._state))
    in_parts = 0
    for text in texts:
        data = json.loads(text)
        assert text == json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        in_parts += sum(
            1 for entry in data["items"] if len(entry) > 2 and isinstance(entry[8], list)
        )
    assert in_parts > 0
    items = {item.id: item for item in session._state.projection.items}
    for entry in json.loads(texts[-1])["items"]:
        ledger = items[entry[0]].ledger if len(entry) > 2 else None
        if isinstance(entry[-1], list) and ledger is not None and hasattr(ledger, "leaves"):
            assert entry[-1] == [dict(leaf) for leaf in ledger.leaves()]
