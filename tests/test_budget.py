"""Budget: reserve, trigger and target numbers, validation, and the model catalog behind it."""

from __future__ import annotations

import dataclasses

import pytest

from ctxfold.errors import BudgetError
from ctxfold.tokens import MODELS, Budget, ModelInfo, lookup, register


@pytest.mark.guarantee("model-catalog-window")
def test_gpt_4o_has_a_128k_window() -> None:
    """Budget.for_model("gpt-4o") has a 128,000-token window and 16,384 max output."""
    budget = Budget.for_model("gpt-4o")
    assert budget.window == 128_000
    assert budget.max_output == 16_384


@pytest.mark.guarantee("model-catalog-window")
def test_unknown_model_without_a_window_is_a_clear_error() -> None:
    """an unknown model without window= fails, naming the model and saying what to pass."""
    with pytest.raises(BudgetError, match=r"'acme-llm-9'.*window="):
        Budget.for_model("acme-llm-9")


def test_unknown_model_with_a_window_works() -> None:
    """An unknown model is fine once the caller gives the window."""
    budget = Budget.for_model("acme-llm-9", window=32_000, max_output=2_000)
    assert (budget.window, budget.reserve_tokens) == (32_000, 2_000)


def test_for_model_overrides_win() -> None:
    """Keyword arguments to for_model replace the catalog's figures."""
    budget = Budget.for_model("gpt-4o", window=64_000, trigger=0.9, keep_steps=2)
    assert (budget.window, budget.max_output, budget.trigger, budget.keep_steps) == (
        64_000,
        16_384,
        0.9,
        2,
    )


@pytest.mark.parametrize(
    ("window", "max_output", "reserve"),
    [
        (128_000, None, 20_000),
        (128_000, 4_096, 4_096),
        (400_000, 100_000, 20_000),
        (30_000, 20_000, 10_000),
    ],
)
@pytest.mark.guarantee("model-aware-reserve")
def test_reserve_from_max_output(window: int, max_output: int | None, reserve: int) -> None:
    """unknown max output reserves 20,000; 4,096 reserves 4,096; 100,000 is capped at
    20,000; window 30,000 with max output 20,000 reserves a third of the window, 10,000."""
    assert Budget(window, max_output=max_output).reserve_tokens == reserve


@pytest.mark.guarantee("model-aware-reserve")
def test_tiny_window_reserves_at_least_1024() -> None:
    """window 2,000 with max output 1,000 reserves at least 1,024 tokens."""
    assert Budget(2_000, max_output=1_000, target=0.3).reserve_tokens >= 1_024


@pytest.mark.guarantee("model-aware-reserve")
def test_explicit_reserve_wins() -> None:
    """an explicit reserve is used as given, even below the floor or above the max output."""
    assert Budget(128_000, max_output=4_096, reserve=500).reserve_tokens == 500
    assert Budget(128_000, max_output=4_096, reserve=30_000).reserve_tokens == 30_000


@pytest.mark.guarantee("trigger-points")
def test_trigger_fraction_fires_at_102400() -> None:
    """trigger 0.8 on a 128,000 window fires at 102,400 tokens, not before."""
    budget = Budget(128_000, trigger=0.8)
    assert budget.trigger_tokens == 102_400
    assert not budget.should_compact(102_399)
    assert budget.should_compact(102_400)


@pytest.mark.guarantee("trigger-points")
def test_reserve_mode_fires_at_120000() -> None:
    """with no trigger, window 128,000 and max output 8,000 fire at 120,000 tokens."""
    budget = Budget(128_000, max_output=8_000)
    assert budget.trigger_tokens == 120_000
    assert not budget.should_compact(119_999)
    assert budget.should_compact(120_000)


def test_target_is_a_fraction_or_a_token_count() -> None:
    """target <= 1 is a fraction of the window; a larger number is a token count."""
    assert Budget(100_000).target_tokens == 40_000
    assert Budget(100_000, target=0.25).target_tokens == 25_000
    assert Budget(100_000, target=30_000).target_tokens == 30_000


@pytest.mark.parametrize(
    ("trigger", "target"),
    [(0.5, 0.5), (0.5, 0.6), (0.8, 0.0), (0.8, -0.1), (0.0, 0.4), (1.2, 0.4), (-0.5, 0.4)],
)
@pytest.mark.guarantee("budget-fractions-validated")
def test_trigger_and_target_fractions_are_validated(trigger: float, target: float) -> None:
    """anything but 0 < target < trigger <= 1 is a ValueError naming the bad value."""
    with pytest.raises(ValueError, match=r"target|trigger"):
        Budget(128_000, trigger=trigger, target=target)


@pytest.mark.guarantee("budget-fractions-validated")
def test_valid_fractions_are_accepted() -> None:
    """target just below trigger, and trigger of exactly 1, are fine."""
    budget = Budget(128_000, trigger=1.0, target=0.99)
    assert budget.trigger_tokens == 128_000


def test_target_above_the_reserve_trigger_point_is_an_error() -> None:
    """A target at or over the trigger point could never be reached usefully, so it is refused."""
    with pytest.raises(BudgetError, match="below the trigger point"):
        Budget(128_000, max_output=8_000, target=120_000)
    with pytest.raises(BudgetError, match="below the trigger point"):
        Budget(10_000, max_output=4_000, target=0.9)


@pytest.mark.parametrize("window", [0, -1, -128_000])
@pytest.mark.guarantee("budget-live-and-validated")
def test_zero_or_negative_window_is_an_error(window: int) -> None:
    """a zero or negative window is an error, not a silent "off"."""
    with pytest.raises(BudgetError, match=rf"window.*{window}.*pass no budget"):
        Budget(window)


def test_window_smaller_than_its_reserve_is_an_error() -> None:
    """A window an explicit reserve swallows whole is refused with a hint to pass reserve= or
    trigger=."""
    with pytest.raises(BudgetError, match=r"reserve=.*trigger="):
        Budget(1_000, reserve=1_000)


@pytest.mark.guarantee("model-aware-reserve")
def test_a_1500_token_window_works_with_every_default() -> None:
    """Budget(window=1500) once raised: the 1,024-token floor left the trigger under the target.
    A window too small for the floor reserves a third of itself, and the tail scales down."""
    budget = Budget(window=1_500)
    assert budget.reserve_tokens == 500
    assert (budget.target_tokens, budget.trigger_tokens) == (600, 1_000)
    assert budget.recent_tail_tokens == 300


@pytest.mark.guarantee("model-aware-reserve")
def test_every_window_gets_working_defaults() -> None:
    """Whatever the window, the defaults give 0 <= target < trigger <= window; a window too
    small for the 1,024-token floor reserves a third of itself; the recent tail stays within
    the target."""
    for window in [*range(1, 6_000), *range(6_000, 2_000_000, 1_013)]:
        budget = Budget(window=window)
        assert 0 <= budget.target_tokens < budget.trigger_tokens <= window, window
        if window - 1_024 <= budget.target_tokens:
            assert budget.reserve_tokens == window // 3, window
        assert budget.recent_tail_tokens <= budget.target_tokens, window


@pytest.mark.guarantee("model-aware-reserve")
def test_budgets_that_worked_before_keep_their_reserve() -> None:
    """Only windows the 1,024 floor made impossible changed: any other budget reserves exactly
    what the rule without the exception gives (the max output capped at 20,000, a third of the
    window when that takes half of it, never under 1,024)."""
    checked = 0
    for window in range(1_000, 400_001, 397):
        for max_output in (None, 1_000, 4_096, 64_000):
            rule = 20_000 if max_output is None else min(max_output, 20_000)
            rule = window // 3 if 2 * rule >= window else rule
            rule = max(rule, 1_024)
            if window - rule <= round(window * 0.4):
                continue  # this budget could not be built before
            assert Budget(window=window, max_output=max_output).reserve_tokens == rule
            checked += 1
    assert checked > 3_000


def test_explicit_impossible_settings_are_still_errors() -> None:
    """Derived defaults scale down; settings the caller chose do not: a target above the
    trigger point is refused even on a small window."""
    with pytest.raises(BudgetError, match="below the trigger point"):
        Budget(window=1_500, target=0.9)
    with pytest.raises(BudgetError, match="reserve="):
        Budget(window=1_500, reserve=1_500)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("keep_steps", -1),
        ("keep_recent_tokens", -5),
        ("min_messages", -1),
        ("reserve", -1),
        ("max_output", 0),
        ("window", 1.5),
    ],
)
def test_negative_settings_are_errors(field: str, value: float) -> None:
    """Negative counts, a zero max output or a fractional window are refused, naming the field."""
    fields: dict[str, object] = {"window": 128_000, field: value}
    with pytest.raises(BudgetError, match=field):
        Budget(**fields)  # type: ignore[arg-type]


def test_budget_is_frozen_and_revalidated_on_replace() -> None:
    """A budget cannot be changed in place; a replaced copy is validated again."""
    budget = Budget(128_000)
    with pytest.raises(dataclasses.FrozenInstanceError):
        budget.window = 1  # type: ignore[misc]
    with pytest.raises(BudgetError):
        dataclasses.replace(budget, window=0)


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("gpt-4o", "gpt-4o"),
        ("GPT-4o", "gpt-4o"),
        ("openai/gpt-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4.1-nano-2025-04-14", "gpt-4.1-nano"),
        ("anthropic/claude-3.7-sonnet:thinking", "claude-3-7-sonnet"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),
        ("models/gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
        ("gemini-3-pro-preview", "gemini-3-pro"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3-70b"),
        ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5-72b"),
        ("mistral-large-latest", "mistral-large"),
        ("deepseek-reasoner", "deepseek-reasoner"),
        ("claude-4-sonnet", "claude-sonnet-4"),
        ("claude-4-opus-20250514", "claude-opus-4"),
        ("claude-4-1-opus", "claude-opus-4-1"),
        ("claude-4.5-sonnet", "claude-sonnet-4-5"),
        ("claude-sonnet-4-0", "claude-sonnet-4"),
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("anthropic.claude-opus-4-1-20250805-v1:0", "claude-opus-4-1"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("deepseek-v4-flash", "deepseek-v4-flash"),
        ("deepseek/deepseek-v4-pro", "deepseek-v4-pro"),
        ("deepseek-v4-pro-0813", "deepseek-v4-pro"),
        ("gpt-5.4-mini-2026-03-17", "gpt-5.4-mini"),
    ],
)
def test_lookup_finds_prefixed_and_dated_names(name: str, canonical: str) -> None:
    """Provider prefixes, case, router spellings and dated snapshots resolve to the model."""
    info = lookup(name)
    assert info is not None
    assert info.name == canonical


def test_lookup_does_not_guess_unknown_models() -> None:
    """A name that matches nothing gives None rather than a neighbour's figures."""
    assert lookup("totally-new-model") is None
    assert lookup("gpt-4o") is not lookup("gpt-4o-mini")


def test_catalog_covers_the_main_families() -> None:
    """Every family users run agents on has an entry with a positive window."""
    for name in [
        "gpt-4o", "gpt-4o-mini", "gpt-4.1", "o1", "o3", "o4-mini", "gpt-5", "gpt-5-mini",
        "claude-3-5-sonnet", "claude-3-7-sonnet", "claude-sonnet-4", "claude-opus-4",
        "claude-opus-4-1", "claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-5",
        "claude-opus-4-6", "claude-sonnet-4-6", "deepseek-v4-flash", "deepseek-v4-pro",
        "gpt-5.1", "gpt-5.2", "gpt-5.4", "gpt-5.4-mini",
        "gemini-1.5-pro", "gemini-2.0-flash", "gemini-2.5-pro", "gemini-2.5-flash",
        "deepseek-chat", "deepseek-reasoner", "llama-3.1-405b", "llama-3.3-70b", "llama-4-maverick",
        "qwen2.5-72b", "qwen3-235b-a22b", "mistral-large", "mistral-small", "codestral",
    ]:  # fmt: skip
        info = MODELS[name]
        assert info.window > 0
        assert info.max_output is None or 0 < info.max_output <= info.window


@pytest.mark.parametrize(
    ("name", "window", "max_output"),
    [
        ("claude-sonnet-4", 200_000, 64_000),
        ("claude-opus-4", 200_000, 32_000),
        ("claude-opus-4-1", 200_000, 32_000),
        ("claude-sonnet-4-5", 200_000, 64_000),
        ("claude-haiku-4-5", 200_000, 64_000),
        ("claude-opus-4-5", 200_000, 64_000),
        ("deepseek-v4-flash", 1_000_000, 384_000),
        ("deepseek-v4-pro", 1_000_000, 384_000),
    ],
)
@pytest.mark.guarantee("model-catalog-window")
def test_current_models_have_their_published_limits(
    name: str, window: int, max_output: int
) -> None:
    """The Claude 4 family and DeepSeek V4 budget with the window and reply size their
    providers publish, and Budget.for_model derives a working budget from them."""
    budget = Budget.for_model(name)
    assert (budget.window, budget.max_output) == (window, max_output)
    assert budget.reserve_tokens == min(max_output, 20_000)


def test_register_adds_a_model_budgets_can_use() -> None:
    """A registered model is found under its name, aliases, prefixes and snapshots."""
    info = ModelInfo("ctxfold-test-model", window=50_000, max_output=5_000, provider="test")
    register(info, aliases=["ctxfold-test-alias"])
    try:
        assert lookup("acme/ctxfold-test-model-2030-01-01") is info
        assert lookup("ctxfold-test-alias") is info
        assert Budget.for_model("ctxfold-test-model").trigger_tokens == 45_000
    finally:
        MODELS.pop("ctxfold-test-model")
        MODELS.pop("ctxfold-test-alias")


def test_model_info_rejects_a_non_positive_window() -> None:
    """A catalog entry with a zero window is refused when it is created."""
    with pytest.raises(ValueError, match="window"):
        ModelInfo("broken", window=0)
