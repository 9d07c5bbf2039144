"""How many tokens a conversation may use, when compaction starts, and where it stops.

Three numbers, all in tokens:

- the *reserve* is left free for the model's reply (and for counting error);
- the *trigger point* is where compaction starts: ``window * trigger`` when a trigger fraction is
  given, else ``window - reserve``;
- the *target* is the size compaction brings the context down to, well under the trigger point
  so that the next compaction is many turns away.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, TypeGuard

from ctxfold.errors import BudgetError, ConfigurationError
from ctxfold.tokens.catalog import lookup

RESERVE_CAP = 20_000
"""Most tokens reserved for the reply when the model's max output is larger (or unknown)."""

USER_WORDS_CAP = 20_000
"""The most tokens of the user's own messages kept verbatim by default (see
`Budget.user_words_tokens`)."""

RESERVE_FLOOR = 1_024
"""Fewest tokens reserved by default, unless the window is too small for that (see
`Budget.reserve_tokens`)."""


@dataclass(frozen=True)
class Budget:
    """The token budget of one model context.

    >>> Budget.for_model("gpt-4o").trigger_tokens      # 128,000 window - 16,384 reserve
    111616
    >>> Budget(window=128_000, trigger=0.8).trigger_tokens
    102400
    """

    window: int
    """Context window in tokens (prompt and reply together). Required, positive."""
    max_output: int | None = None
    """The model's largest reply in tokens; None (default) when unknown."""
    reserve: int | None = None
    """Tokens kept free for the reply. Default None: derived from `max_output` (see
    `reserve_tokens`). An explicit value is used as given."""
    trigger: float | None = None
    """Fraction of the window at which compaction starts, in (0, 1]. Default None: start at
    ``window - reserve`` tokens instead."""
    target: float = 0.4
    """Where compaction stops: a fraction of the window when <= 1 (default 0.4), else a token
    count (see `target_in_tokens`, which `Compactor.compact(target=...)` reads the same way).
    Must be below the trigger point."""
    keep_recent_tokens: int = 8_000
    """At least this many of the newest tokens stay verbatim (default 8,000 tokens), up to half
    the target: see `recent_tail_tokens`, which scales it down for small windows."""
    keep_count: int = 0
    """At least this many of the newest messages stay verbatim too, whenever the target allows
    (default 0: the token tail alone)."""
    keep_steps: int = 1
    """The newest this-many assistant steps are never compacted (default 1, at least 1: the
    newest step is what the agent is working on)."""
    min_messages: int = 6
    """A history with fewer messages than this is never compacted, and the verbatim recent tail
    keeps at least this many messages whenever the target allows (default 6 messages)."""
    keep_user_tokens: int | None = None
    """Tokens of the user's own messages (the task and every later instruction) that no
    strategy summarizes or drops. Default None: the smaller of 20,000 tokens and half the
    target (see `user_words_tokens`); 0 gives the user's words no more protection than any
    other message (the current request stays pinned either way)."""

    def __post_init__(self) -> None:
        if not _is_int(self.window) or self.window <= 0:
            # Zero or less is never read as "no limit": a budget that silently never fires would
            # let a session overflow. Leaving the budget out is how to turn compaction off.
            raise BudgetError(
                f"window must be a positive number of tokens, not {self.window!r}; "
                "to turn automatic compaction off, pass no budget"
            )
        if self.max_output is not None:
            _check_int("max_output", self.max_output, minimum=1, unit="tokens")
        if self.reserve is not None:
            _check_int("reserve", self.reserve, minimum=0, unit="tokens")
        _check_int("keep_recent_tokens", self.keep_recent_tokens, minimum=0, unit="tokens")
        _check_int("keep_count", self.keep_count, minimum=0, unit="messages")
        if not _is_int(self.keep_steps) or self.keep_steps < 1:
            # `window-drops-oldest-whole`, `clearing-keeps-recent-and-small`: the newest step is
            # what the agent is reading now; no rung may take it, whatever the budget says.
            raise BudgetError(
                f"keep_steps must be a whole number of steps >= 1, not {self.keep_steps!r}: the "
                "newest step is what the agent is working on, and is never compacted"
            )
        if self.keep_user_tokens is not None:
            _check_int("keep_user_tokens", self.keep_user_tokens, minimum=0, unit="tokens")
        _check_int("min_messages", self.min_messages, minimum=0, unit="messages")
        if self.trigger is not None and (not _is_number(self.trigger) or not 0 < self.trigger <= 1):
            raise BudgetError(f"trigger must be a fraction in (0, 1], not {self.trigger!r}")
        target_in_tokens(self.target, self.window)  # refuses what is no target
        if self.trigger is not None and self.target <= 1 and self.target >= self.trigger:
            raise BudgetError(
                f"target {self.target!r} must be below trigger {self.trigger!r} "
                "(0 < target < trigger <= 1)"
            )
        if self.trigger_tokens <= 0:
            raise BudgetError(
                f"a reserve of {self.reserve_tokens:,} tokens leaves nothing of a "
                f"{self.window:,}-token window; pass a smaller reserve= or a trigger= fraction"
            )
        if self.target_tokens >= self.trigger_tokens:
            raise BudgetError(
                f"target of {self.target_tokens:,} tokens must be below the trigger point of "
                f"{self.trigger_tokens:,} tokens; lower target= or raise the trigger"
            )

    @classmethod
    def for_model(cls, model: str, **overrides: Any) -> Budget:
        """The budget of a catalog model; keyword arguments override any field.

        An unknown model needs ``window=`` (and ideally ``max_output=``):

        >>> Budget.for_model("my-finetune", window=32_768, max_output=4_096).reserve_tokens
        4096
        """
        if not isinstance(model, str) or not model.strip():
            raise BudgetError(
                f"Budget.for_model needs a model name such as 'gpt-4o', not {model!r}; "
                "for a window of your own, use Budget(window=...)"
            )
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = [name for name in overrides if name not in known]
        if unknown:
            raise ConfigurationError(
                f"Budget.for_model got an unknown keyword {unknown[0]!r}; it takes the fields "
                f"of Budget: {', '.join(known)}"
            )
        info = lookup(model)
        if info is None:
            if "window" not in overrides:
                raise BudgetError(
                    f"unknown model {model!r}: pass window= (and max_output=) to "
                    "Budget.for_model, or add it with ctxfold.tokens.register(ModelInfo(...))"
                )
            return cls(**overrides)
        fields: dict[str, Any] = {"window": info.window, "max_output": info.max_output}
        fields.update(overrides)
        return cls(**fields)

    @property
    def reserve_tokens(self) -> int:
        """Tokens left free for the reply.

        An explicit `reserve` wins. Otherwise the max output capped at 20,000 (20,000 when
        unknown); if that would take half the window or more, a third of the window instead;
        never under 1,024, unless the window is so small that 1,024 would leave the trigger
        point at or below the target: then the third stands, so that a small window
        (``Budget(window=1500)``) still works with every default.

        >>> Budget(window=1500).reserve_tokens, Budget(window=1500).trigger_tokens
        (500, 1000)
        """
        if self.reserve is not None:
            return self.reserve
        tokens = RESERVE_CAP if self.max_output is None else min(self.max_output, RESERVE_CAP)
        if 2 * tokens >= self.window:
            tokens = self.window // 3
        if tokens < RESERVE_FLOOR and (
            self.trigger is not None or self.window - RESERVE_FLOOR > self.target_tokens
        ):
            tokens = RESERVE_FLOOR
        return tokens

    @property
    def recent_tail_tokens(self) -> int:
        """The verbatim recent tail compaction keeps, in tokens: `keep_recent_tokens`, but never
        more than half the target, so that it scales down with the window.

        >>> Budget(window=128_000).recent_tail_tokens, Budget(window=1_500).recent_tail_tokens
        (8000, 300)
        """
        return min(self.keep_recent_tokens, self.target_tokens // 2)

    @property
    def user_words_tokens(self) -> int:
        """The bound on the user's words kept verbatim, in tokens: `keep_user_tokens`, or by
        default the smaller of 20,000 and half the target.

        >>> Budget(window=16_000).user_words_tokens, Budget(window=200_000).user_words_tokens
        (3200, 20000)
        """
        if self.keep_user_tokens is not None:
            return self.keep_user_tokens
        return user_words_bound(self.target_tokens)

    @property
    def trigger_tokens(self) -> int:
        """The estimate, in tokens, at which compaction starts."""
        if self.trigger is not None:
            return round(self.window * self.trigger)
        return self.window - self.reserve_tokens

    @property
    def target_tokens(self) -> int:
        """The size, in tokens, compaction brings the context down to."""
        return target_in_tokens(self.target, self.window)

    def should_compact(self, estimate: int) -> bool:
        """True once the estimate has reached the trigger point."""
        return estimate >= self.trigger_tokens


def target_in_tokens(target: object, window: int | None) -> int:
    """A target in tokens, read as `Budget.target` is: a number in (0, 1] is a fraction of
    `window`, a larger one a count of tokens. `Budget` and `Compactor.compact(target=...)` both
    read it here, so ``0.5`` means half the window in either place.

    Anything else (a bool, zero or less, NaN, infinity, a string) is a `BudgetError`, and so is a
    fraction with no window to take it of (`window` None: a compactor without a budget).

    >>> target_in_tokens(0.5, 128_000), target_in_tokens(1_500, 128_000)
    (64000, 1500)
    """
    if not _is_number(target) or not math.isfinite(target) or not target > 0:
        raise BudgetError(
            "target must be a fraction of the window in (0, 1] or a token count above 1, "
            f"not {target!r}"
        )
    if target > 1:
        return int(target)
    if window is None:
        raise BudgetError(
            f"target {target!r} is a fraction of the window, and there is no budget to take it "
            "of; pass a token count above 1, or give the compactor a budget"
        )
    return round(window * target)


def user_words_bound(target: int) -> int:
    """The default bound on the user's words kept verbatim, for a target of `target` tokens:
    the smaller of 20,000 tokens and half the target."""
    return min(USER_WORDS_CAP, max(0, target) // 2)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_int(field: str, value: object, *, minimum: int, unit: str) -> None:
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= minimum):
        raise BudgetError(f"{field} must be a whole number of {unit} >= {minimum:,}, not {value!r}")
