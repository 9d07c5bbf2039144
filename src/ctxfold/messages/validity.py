"""Check a history against the rules providers enforce with a 400, and repair what can be repaired.

`validate` returns `Problem`s. Those of severity "error" are what a provider rejects: a tool result
that does not directly follow the assistant message that made its call, a call left without a
result before the conversation moves on, a batch of parallel calls answered in two places, and
for Anthropic a role order, a system message, a reused call id or tool arguments that are not a
JSON object, which the Messages API cannot take. What `to_anthropic` refuses, `validate(messages,
"anthropic")` reports as an error, by the same rules (`anthropic_role`, `tool_use_input`); what
`to_anthropic` rewrites (a call id the API would refuse, see `anthropic_id`) is no problem.
Severity "info" marks what is legal but worth knowing: a call still pending at the end (the agent
is waiting for it) and, for OpenAI, a call id used twice (paired by position, as
`structure.answers` does).

`repair` fixes only what it can fix without guessing: it drops tool results that answer no call
and answers each call that was never answered with a placeholder naming the call id. It is
deterministic and idempotent, and leaves a pending final call alone.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ctxfold.errors import InvalidInputError
from ctxfold.messages._given import given_messages
from ctxfold.messages._values import Message
from ctxfold.messages.anthropic import anthropic_role, tool_use_input
from ctxfold.messages.structure import answers

Provider = Literal["openai", "anthropic"]
Severity = Literal["error", "info"]
PROVIDERS: tuple[Provider, ...] = ("openai", "anthropic")

PLACEHOLDER = "[no result: call {call_id!r} ({name}) was never answered]"
"""Text of the tool result `repair` adds for a call that was never answered."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong (or worth knowing) about a history.

    - `index`: the message it is about.
    - `code`: a short kebab-case name: "orphan-result", "missing-result", "pending-call",
      "duplicate-call-id", "split-batch", "misplaced-result", "role-order", "empty-message",
      "system-not-first", "bad-arguments".
    - `message`: a sentence naming the call id or index.
    - `severity`: "error" (a provider would reject the history) or "info".
    """

    index: int
    code: str
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        return f"message {self.index}: {self.code} ({self.severity}): {self.message}"


def validate(
    messages: Sequence[Message] | Iterable[Message] | Message, provider: Provider = "openai"
) -> list[Problem]:
    """Every problem of `messages` (a list, or one `Message`) for `provider`, ordered by message
    index.

    >>> from ctxfold.messages import Message, ToolCall
    >>> [p.code for p in validate([Message("user", "hi"),
    ...                            Message("tool", "a.py", tool_call_id="call_1")])]
    ['orphan-result']
    """
    if provider not in PROVIDERS:
        raise InvalidInputError(f"unknown provider {provider!r}; expected openai or anthropic")
    history = given_messages(messages, "validate")
    problems = _pairing(history) + _duplicates(history, provider) + _content(history, provider)
    if provider == "anthropic":
        problems += _anthropic(history)
    return sorted(problems, key=lambda p: p.index)


def is_valid(
    messages: Sequence[Message] | Iterable[Message] | Message, provider: Provider = "openai"
) -> bool:
    """Whether `validate` finds no error (info problems such as a pending call are fine)."""
    return not any(
        p.severity == "error" for p in validate(given_messages(messages, "is_valid"), provider)
    )


@dataclass(frozen=True)
class Fix:
    """One change `plan_repair` makes.

    - `index`: the input message it is about (the dropped result, or the assistant message whose
      call gets a placeholder result).
    - `action`: "dropped" or "added".
    - `call_id`: the call the result answers.
    - `message`: a sentence saying what was changed and why.
    """

    index: int
    action: Literal["dropped", "added"]
    call_id: str
    message: str


@dataclass(frozen=True)
class Repair:
    """A repaired history: its `messages`, the input index each came from (`sources`; a
    placeholder result gets its assistant message's index), and the `fixes` made, in order."""

    messages: list[Message]
    sources: tuple[int, ...]
    fixes: tuple[Fix, ...]


def repair(messages: Sequence[Message] | Iterable[Message] | Message) -> list[Message]:
    """Drop tool results that answer no call and add a placeholder result for each call that was
    never answered and is followed by other messages. A pending final call is left alone.

    >>> from ctxfold.messages import Message, ToolCall
    >>> fixed = repair([Message("assistant", None, (ToolCall("call_1", "ls"),)),
    ...                 Message("user", "go on")])
    >>> [m.role for m in fixed], fixed[1].text
    (['assistant', 'tool', 'user'], "[no result: call 'call_1' (ls) was never answered]")
    """
    return plan_repair(given_messages(messages, "repair")).messages


def plan_repair(messages: Sequence[Message] | Iterable[Message] | Message) -> Repair:
    """`repair`, saying what it changed: one `Fix` per dropped or added result.

    >>> from ctxfold.messages import Message
    >>> [f.message for f in plan_repair([Message("user", "hi"),
    ...                                  Message("tool", "a.py", tool_call_id="c9")]).fixes]
    ["dropped the tool result for call 'c9': no assistant message right before it made that call"]
    """
    messages = given_messages(messages, "plan_repair")
    out: list[Message] = []
    sources: list[int] = []
    fixes: list[Fix] = []
    n = len(messages)
    i = 0
    while i < n:
        message = messages[i]
        end = _results_end(messages, i + 1)
        if message.role == "tool":
            # Results that follow no assistant message answer nothing here.
            for index in range(i, end):
                fixes.append(_dropped(messages[index], index, None))
            i = end
            continue
        out.append(message)
        sources.append(i)
        if message.role != "assistant":
            i += 1
            continue
        results = messages[i + 1 : end]
        orphans, missing = answers([c.id for c in message.tool_calls], results)
        dropped = set(orphans)
        for position, result in enumerate(results):
            if position in dropped:
                fixes.append(_dropped(result, i + 1 + position, i))
            else:
                out.append(result)
                sources.append(i + 1 + position)
        if end < n:
            names = _call_names(message)
            for call_id in missing:
                out.append(_placeholder(call_id, names[call_id]))
                sources.append(i)
                fixes.append(
                    Fix(
                        i,
                        "added",
                        call_id,
                        f"added a placeholder result for call {call_id!r} "
                        f"({names[call_id]}), which was never answered",
                    )
                )
        i = end
    return Repair(out, tuple(sources), tuple(sorted(fixes, key=lambda f: f.index)))


def _dropped(result: Message, index: int, step: int | None) -> Fix:
    call_id = result.tool_call_id or ""
    why = (
        "no assistant message right before it made that call"
        if step is None
        else f"the assistant message before it (index {step}) did not make that call or "
        "already has its result"
    )
    return Fix(index, "dropped", call_id, f"dropped the tool result for call {call_id!r}: {why}")


def _placeholder(call_id: str, name: str) -> Message:
    text = PLACEHOLDER.format(call_id=call_id, name=name)
    return Message("tool", text, tool_call_id=call_id, extra={"ctxfold": {"repair": "placeholder"}})


def _call_names(message: Message) -> Mapping[str, str]:
    return {c.id: c.name for c in message.tool_calls}


def _results_end(messages: Sequence[Message], start: int) -> int:
    end = start
    while end < len(messages) and messages[end].role == "tool":
        end += 1
    return end


def _pairing(messages: Sequence[Message]) -> list[Problem]:
    """Results against calls: orphan, missing, pending, split and misplaced results."""
    problems: list[Problem] = []
    # Calls left unanswered where they were made, by id, oldest first: (assistant index, next).
    unanswered: dict[str, list[tuple[int, int]]] = defaultdict(list)
    n = len(messages)
    i = 0
    while i < n:
        message = messages[i]
        if message.role == "tool":
            problems.append(_late_result(messages, i, unanswered, step=None))
            i += 1
            continue
        if message.role != "assistant":
            i += 1
            continue
        end = _results_end(messages, i + 1)
        orphans, missing = answers([c.id for c in message.tool_calls], messages[i + 1 : end])
        for position in orphans:
            problems.append(_late_result(messages, i + 1 + position, unanswered, step=i))
        if missing and end == n:
            problems.append(
                Problem(
                    i,
                    "pending-call",
                    f"call {', '.join(map(repr, missing))} of the last assistant message (index "
                    f"{i}) has no result yet",
                    "info",
                )
            )
        elif missing:
            for call_id in missing:
                unanswered[call_id].append((i, end))
        i = end
    for call_id, places in unanswered.items():
        for index, following in places:
            problems.append(
                Problem(
                    index,
                    "missing-result",
                    f"call {call_id!r} of the assistant message at index {index} has no result "
                    f"before the next message (index {following})",
                )
            )
    return problems


def _late_result(
    messages: Sequence[Message],
    index: int,
    unanswered: dict[str, list[tuple[int, int]]],
    step: int | None,
) -> Problem:
    """A tool result that answers no call of the assistant message `step` it follows (None when
    it follows no assistant message): a late result of an earlier call, or an orphan."""
    call_id = messages[index].tool_call_id or ""
    places = unanswered.get(call_id)
    if not places:
        where = (
            f"the assistant message at index {step} did not make (or already has a result for)"
            if step is not None
            else "no assistant message directly before it made"
        )
        return Problem(
            index,
            "orphan-result",
            f"the tool result at index {index} answers call {call_id!r}, which {where}",
        )
    origin, following = places.pop(0)
    batch = len(messages[origin].tool_calls) > 1
    what = "a batch of parallel calls" if batch else "a call"
    return Problem(
        index,
        "split-batch" if batch else "misplaced-result",
        f"the result of call {call_id!r} (index {index}) is separated from {what} made at index "
        f"{origin} by the message at index {following}; results must directly follow their call",
    )


def _duplicates(messages: Sequence[Message], provider: Provider) -> list[Problem]:
    # OpenAI accepts a reused id and answers pair by position; the Messages API wants every
    # tool_use id of a request to be unique.
    severity: Severity = "error" if provider == "anthropic" else "info"
    seen: Counter[str] = Counter()
    problems: list[Problem] = []
    for index, message in enumerate(messages):
        for call in message.tool_calls:
            seen[call.id] += 1
            if seen[call.id] > 1:
                problems.append(
                    Problem(
                        index,
                        "duplicate-call-id",
                        f"call id {call.id!r} is used again at index {index}; its results are "
                        "paired with its calls by position",
                        severity,
                    )
                )
    return problems


def _content(messages: Sequence[Message], provider: Provider) -> list[Problem]:
    problems: list[Problem] = []
    last = len(messages) - 1
    for index, message in enumerate(messages):
        if message.role not in ("user", "assistant") or message.tool_calls or _has_media(message):
            continue
        if provider == "openai":
            empty = message.content is None and not _kept_fields(message, "openai")
        else:
            # The Messages API allows an empty final assistant message (a prefill), nothing else.
            empty = not message.text.strip() and not (message.role == "assistant" and index == last)
        if empty:
            problems.append(
                Problem(
                    index,
                    "empty-message",
                    f"the {message.role} message at index {index} has no content and no tool calls",
                )
            )
    return problems


def _has_media(message: Message) -> bool:
    """Whether kept provider blocks carry something besides text (an image, a document...)."""
    for provider, key in (("openai", "parts"), ("anthropic", "blocks")):
        kept = message.extra.get(provider)
        blocks = kept.get(key) if isinstance(kept, Mapping) else None
        for block in blocks if isinstance(blocks, list) else ():
            if isinstance(block, Mapping) and block.get("type") != "text":
                return True
    return False


def _kept_fields(message: Message, provider: str) -> bool:
    kept = message.extra.get(provider)
    fields = kept.get("fields") if isinstance(kept, Mapping) else None
    # An OpenAI assistant message may carry a refusal or audio instead of content.
    return isinstance(fields, Mapping) and any(fields.get(k) for k in ("refusal", "audio"))


def _anthropic(messages: Sequence[Message]) -> list[Problem]:
    """What the Messages API refuses that OpenAI takes: the role order, system text after the
    start, and calls whose arguments cannot be a tool_use input."""
    # Each message is judged in the role the adapter sends it with, so that what `to_anthropic`
    # accepts and what `validate` reports agree (ctxfold's own summaries and notes move to user).
    problems: list[Problem] = []
    started = False
    for index, message in enumerate(messages):
        role = anthropic_role(message, started=started)
        if role == "assistant":
            for call in message.tool_calls:
                try:
                    tool_use_input(call)
                except InvalidInputError as exc:
                    problems.append(
                        Problem(
                            index,
                            "bad-arguments",
                            f"{exc} (the assistant message at index {index})",
                        )
                    )
        if role == "system":
            if started:
                problems.append(
                    Problem(
                        index,
                        "system-not-first",
                        f"the system message at index {index} comes after the conversation "
                        "started; Anthropic takes system text only before it",
                    )
                )
            continue
        if not started and role != "user":
            problems.append(
                Problem(
                    index,
                    "role-order",
                    f"the first message after the system prompt (index {index}) is "
                    f"{role!r}; Anthropic needs it to be a user message",
                )
            )
        started = True
    return problems
