"""Check a history against the rules providers enforce with a 400, and repair what can be repaired.

`validate` returns `Problem`s. Those of severity "error" are what a provider rejects: a tool result
that does not directly follow the assistant message that made its call, a call left without a
result before the conversation moves on, a batch of parallel calls answered in two places, a
user message with no content, a part the provider's format has no equivalent for (audio sent to
Anthropic, a PDF by URL sent to OpenAI: see `ctxfold.messages.convert`), and for Anthropic a role
order, a system message, a reused call id, tool arguments that are not a JSON object, or a
system prompt with no message after it, which the Messages API cannot take. What `to_anthropic`
(or `to_openai`) refuses, `validate(messages, "anthropic")` (or "openai") reports as an error, by
the same rules (`anthropic_role`, `tool_use_input`, `carried_to_anthropic`,
`carried_to_openai`); what `to_anthropic` rewrites (a call id the API would refuse, see
`anthropic_id`) is no problem.
Severity "info" marks what is legal but worth knowing: a call still pending at the end (the agent
is waiting for it) and, for OpenAI, a call id used twice (paired by position, as
`structure.answers` does).

`repair` fixes only what it can fix without guessing, by three rules:

- a result that comes late, after other messages, for a call still unanswered (a split batch, a
  misplaced result) is *moved* up to the other results of its call, ahead of the messages that
  came between them: it is the real answer, only out of place;
- a result that answers no call (none was made, or its call already has a result) is *dropped*;
- a call that no result answers anywhere, followed by other messages, is *added* a placeholder
  result naming the call id (`PLACEHOLDER`).

Results are paired with calls as `validate` pairs them (one walk serves both), so what `validate`
calls split-batch or misplaced-result is moved, and what it calls orphan-result is dropped. The
repair is deterministic and idempotent, and leaves a pending final call alone.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ctxfold.errors import InvalidInputError
from ctxfold.messages._given import given_messages
from ctxfold.messages._values import Message
from ctxfold.messages.anthropic import anthropic_role, sent_blocks, tool_use_input
from ctxfold.messages.convert import carried_to_anthropic, carried_to_openai
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
      "system-not-first", "bad-arguments", "no-equivalent", "no-conversation".
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

    - `index`: the input message it is about (the dropped or moved result, or the assistant
      message whose call gets a placeholder result).
    - `action`: "dropped", "moved" or "added".
    - `call_id`: the call the result answers.
    - `message`: a sentence saying what was changed and why.
    """

    index: int
    action: Literal["dropped", "moved", "added"]
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
    """Move results that came late up to their call, drop tool results that answer no call, and
    add a placeholder result for each call that was never answered and is followed by other
    messages. A pending final call is left alone.

    >>> from ctxfold.messages import Message, ToolCall
    >>> fixed = repair([Message("assistant", None, (ToolCall("call_1", "ls"),)),
    ...                 Message("user", "go on")])
    >>> [m.role for m in fixed], fixed[1].text
    (['assistant', 'tool', 'user'], "[no result: call 'call_1' (ls) was never answered]")
    """
    return plan_repair(given_messages(messages, "repair")).messages


def plan_repair(messages: Sequence[Message] | Iterable[Message] | Message) -> Repair:
    """`repair`, saying what it changed: one `Fix` per moved, dropped or added result.

    >>> from ctxfold.messages import Message, ToolCall
    >>> late = plan_repair([Message("assistant", None, (ToolCall("c1", "ls"),)),
    ...                     Message("user", "hey"), Message("tool", "a.py", tool_call_id="c1")])
    >>> [m.role for m in late.messages], late.sources, [f.action for f in late.fixes]
    (['assistant', 'tool', 'user'], (0, 2, 1), ['moved'])
    >>> [f.message for f in plan_repair([Message("user", "hi"),
    ...                                  Message("tool", "a.py", tool_call_id="c9")]).fixes]
    ["dropped the tool result for call 'c9': no assistant message right before it made that call"]
    """
    messages = given_messages(messages, "plan_repair")
    pairing = _pair(messages)
    # The late results of each call, in the order they came: (assistant index, call id) -> index.
    moved: dict[tuple[int, str], list[int]] = defaultdict(list)
    for index, (origin, _) in pairing.late.items():
        moved[origin, messages[index].tool_call_id or ""].append(index)
    # Where each step's unanswered calls get their answer: right after its own results.
    closing = {
        end: step
        for step, (end, missing) in pairing.steps.items()
        if missing and end < len(messages)
    }
    out: list[Message] = []
    sources: list[int] = []
    fixes: list[Fix] = []
    for index, message in enumerate(messages):
        step = closing.get(index)
        if step is not None:
            names = _call_names(messages[step])
            for call_id in pairing.steps[step][1]:
                answer = moved.get((step, call_id))
                if answer:
                    late = answer.pop(0)
                    out.append(messages[late])
                    sources.append(late)
                    fixes.append(_moved(call_id, names[call_id], late, pairing.late[late]))
                    continue
                out.append(_placeholder(call_id, names[call_id]))
                sources.append(step)
                fixes.append(
                    Fix(
                        step,
                        "added",
                        call_id,
                        f"added a placeholder result for call {call_id!r} "
                        f"({names[call_id]}), which was never answered",
                    )
                )
        if index in pairing.orphans:
            fixes.append(_dropped(message, index, pairing.orphans[index]))
        elif index not in pairing.late:  # a late result was moved up to its call, above
            out.append(message)
            sources.append(index)
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


def _moved(call_id: str, name: str, index: int, place: tuple[int, int]) -> Fix:
    origin, between = place
    return Fix(
        index,
        "moved",
        call_id,
        f"moved the tool result for call {call_id!r} ({name}) up to its call, made by the "
        f"assistant message at index {origin}, ahead of the message at index {between} that "
        "came between them",
    )


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


@dataclass(frozen=True)
class _Pairing:
    """How the results of a history pair with its calls, the one walk `validate` reports from and
    `plan_repair` repairs from, so that the two always agree.

    - `steps`: each assistant message's index -> (the end of the results right after it, its
      call ids left without a result there, in call order).
    - `orphans`: each result that answers no call -> the assistant message it follows (None:
      none), or
    - `late`: each result that answers an earlier call left unanswered -> (the assistant message
      that made the call, the message that came between them).
    - `unanswered`: the calls no result answers anywhere: (call id, assistant index, the message
      that came after it).
    """

    steps: dict[int, tuple[int, list[str]]]
    orphans: dict[int, int | None]
    late: dict[int, tuple[int, int]]
    unanswered: list[tuple[str, int, int]]


def _pair(messages: Sequence[Message]) -> _Pairing:
    steps: dict[int, tuple[int, list[str]]] = {}
    orphans: dict[int, int | None] = {}
    late: dict[int, tuple[int, int]] = {}
    # Calls left unanswered where they were made, by id, oldest first: (assistant index, next).
    waiting: dict[str, list[tuple[int, int]]] = defaultdict(list)

    def stray(index: int, step: int | None) -> None:
        places = waiting.get(messages[index].tool_call_id or "")
        if places:
            late[index] = places.pop(0)
        else:
            orphans[index] = step

    n = len(messages)
    i = 0
    while i < n:
        message = messages[i]
        if message.role == "tool":
            stray(i, None)
            i += 1
            continue
        if message.role != "assistant":
            i += 1
            continue
        end = _results_end(messages, i + 1)
        found, missing = answers([c.id for c in message.tool_calls], messages[i + 1 : end])
        for position in found:
            stray(i + 1 + position, i)
        steps[i] = (end, missing)
        if end < n:
            for call_id in missing:
                waiting[call_id].append((i, end))
        i = end
    unanswered = [(c, index, after) for c, places in waiting.items() for index, after in places]
    return _Pairing(steps, orphans, late, unanswered)


def _pairing(messages: Sequence[Message]) -> list[Problem]:
    """Results against calls: orphan, missing, pending, split and misplaced results."""
    pairing = _pair(messages)
    problems: list[Problem] = []
    for index, step in pairing.orphans.items():
        call_id = messages[index].tool_call_id or ""
        where = (
            f"the assistant message at index {step} did not make (or already has a result for)"
            if step is not None
            else "no assistant message directly before it made"
        )
        problems.append(
            Problem(
                index,
                "orphan-result",
                f"the tool result at index {index} answers call {call_id!r}, which {where}",
            )
        )
    for index, (origin, following) in pairing.late.items():
        call_id = messages[index].tool_call_id or ""
        batch = len(messages[origin].tool_calls) > 1
        what = "a batch of parallel calls" if batch else "a call"
        problems.append(
            Problem(
                index,
                "split-batch" if batch else "misplaced-result",
                f"the result of call {call_id!r} (index {index}) is separated from {what} made "
                f"at index {origin} by the message at index {following}; results must directly "
                "follow their call",
            )
        )
    for i, (end, missing) in pairing.steps.items():
        if missing and end == len(messages):
            problems.append(
                Problem(
                    i,
                    "pending-call",
                    f"call {', '.join(map(repr, missing))} of the last assistant message (index "
                    f"{i}) has no result yet",
                    "info",
                )
            )
    for call_id, index, following in pairing.unanswered:
        problems.append(
            Problem(
                index,
                "missing-result",
                f"call {call_id!r} of the assistant message at index {index} has no result "
                f"before the next message (index {following})",
            )
        )
    # Stable: problems about one message keep the order they were found in.
    return sorted(problems, key=lambda p: p.index)


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
    """What a provider refuses in what messages hold: a part the provider's format has no
    equivalent for (what the adapter raises, in its words), or no content at all."""
    carry = carried_to_anthropic if provider == "anthropic" else carried_to_openai
    problems: list[Problem] = []
    last = len(messages) - 1
    for index, message in enumerate(messages):
        try:
            carry(message)
        except InvalidInputError as exc:
            problems.append(
                Problem(
                    index,
                    "no-equivalent",
                    f"the {message.role} message at index {index} cannot be written for "
                    f"{provider} without losing a part: {exc}",
                )
            )
            continue
        if message.role not in ("user", "assistant") or message.tool_calls:
            continue
        if provider == "openai":
            # OpenAI takes "" and [] as content; null is what it refuses.
            empty = (
                message.content is None
                and not _kept_fields(message, "openai")
                and not _has_media(message)
            )
        else:
            # The Messages API allows an empty final assistant message (a prefill), nothing else.
            prefill = message.role == "assistant" and index == last
            empty = not prefill and not _sends_anthropic_content(message)
        if empty:
            problems.append(
                Problem(
                    index,
                    "empty-message",
                    f"the {message.role} message at index {index} has no content and no tool calls",
                )
            )
    return problems


def _sends_anthropic_content(message: Message) -> bool:
    """Whether `message`, written for the Messages API, sends a block that is not blank text
    (the API refuses a message with none)."""
    if message.text.strip():
        return True
    try:
        blocks = sent_blocks(message)
    except InvalidInputError:
        return True  # reported already, as no-equivalent or bad-arguments
    return any(
        block.get("type") != "text" or str(block.get("text") or "").strip() for block in blocks
    )


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
    start, calls whose arguments cannot be a tool_use input, and no conversation at all."""
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
    if not started:
        what = "only a system prompt" if messages else "no message"
        problems.append(
            Problem(
                0,
                "no-conversation",
                f"the history holds {what}; the Messages API needs at least one message, a user "
                "message first",
            )
        )
    return problems
