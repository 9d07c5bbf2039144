"""What a compactor, a budget, a ladder and the catalog do with the arguments they are given:
a target means the same everywhere, what cannot work is refused at once with a ctxfold error
that names it, and a listener that raises never breaks the automatic trigger."""

from __future__ import annotations

import logging
import math
import threading
from typing import Any

import pytest

import ctxfold
from ctxfold.compactor import Background, CompactionContext, CompactionReport, Compactor
from ctxfold.errors import (
    BudgetError,
    ConfigurationError,
    InvalidInputError,
    SummarizerError,
)
from ctxfold.events import COMPACTION
from ctxfold.messages import Message
from ctxfold.pipeline import ClearToolResults, Pipeline, SlidingWindow, Summarize
from ctxfold.session import Session
from ctxfold.storage import MemoryStore
from ctxfold.summarizers import SummaryRequest
from ctxfold.testing.counters import FixedCounter
from ctxfold.testing.doubles import FunctionSummarizer
from ctxfold.tokens import Budget, counter
from tests._histories import agent_history, step

COUNTER = FixedCounter()
SHORT = "## Objective\n- fix the bugs\n## Work done\n- read the modules"
BUDGET = Budget(window=3000, keep_recent_tokens=0)
"""Trigger at 2,000 tokens (window less a third), target 1,200."""

NOT_TARGETS = [0, -5, True, False, "x", math.nan, math.inf, -math.inf, None]
"""What is no target: a bool, zero or less, NaN, infinity, no number (None only where a target
must be given)."""


def session_with(messages: list[Message]) -> Session:
    session = MemoryStore().session("s", counter=COUNTER)
    session.append(messages)
    return session


def over() -> list[Message]:
    """A history over the budget's trigger."""
    return agent_history(3, output_words=250, task_steps=3)


def compactor(**kwargs: Any) -> Compactor:
    kwargs.setdefault("pipeline", Pipeline([Summarize()]))
    kwargs.setdefault("summarizer", FunctionSummarizer.returning(SHORT))
    return Compactor(kwargs.pop("budget", BUDGET), counter=COUNTER, **kwargs)


def compactions(session: Session) -> int:
    return sum(e.type == COMPACTION for e in session.events())


# -- 1. a target means the same everywhere ------------------------------------------------------
@pytest.mark.guarantee("budget-live-and-validated")
def test_a_fractional_target_of_compact_is_a_share_of_the_window_as_in_a_budget() -> None:
    """`compact(target=0.5)` aims at half the budget's window, as `Budget(target=0.5)` does, and
    a number above 1 is a count of tokens."""
    half = compactor().compact(session_with(over()), target=0.5)
    assert half.target == Budget(window=3000, target=0.5).target_tokens == 1500
    assert half.landed and half.fits
    assert compactor().compact(session_with(over()), target=1500).target == 1500


@pytest.mark.guarantee("budget-live-and-validated")
async def test_acompact_and_compact_messages_read_a_target_the_same_way() -> None:
    """`acompact` and `compact_messages` read a fractional target as a share of the window too."""
    report = await compactor().acompact(session_with(over()), target=0.5)
    assert report.target == 1500
    listed = ctxfold.compact_messages(
        over(), BUDGET, counter=COUNTER, summarizer=FunctionSummarizer.returning(SHORT), target=0.5
    )
    assert listed.report.target == 1500


@pytest.mark.guarantee("budget-live-and-validated")
@pytest.mark.parametrize("target", [t for t in NOT_TARGETS if t is not None])
def test_what_is_no_target_is_refused_before_anything_is_written(target: Any) -> None:
    """A bool, zero or less, NaN, infinity or a non-number as `target` is a `BudgetError`
    naming it, from `compact` and `compact_messages` alike, and nothing is appended."""
    session = session_with(over())
    with pytest.raises(BudgetError, match=r"target must be .*not "):
        compactor().compact(session, target=target)
    assert compactions(session) == 0
    with pytest.raises(BudgetError, match="target must be"):
        ctxfold.compact_messages(over(), BUDGET, counter=COUNTER, target=target)


def test_a_fractional_target_needs_a_budget_to_be_a_share_of() -> None:
    """Without a budget a fraction means nothing: it is refused with a hint to pass tokens."""
    with pytest.raises(BudgetError, match="token count"):
        Compactor(None, counter=COUNTER).compact(session_with(over()), target=0.5)


@pytest.mark.guarantee("budget-fractions-validated")
@pytest.mark.parametrize("target", [math.inf, math.nan, True, "0.4"])
def test_a_budget_refuses_the_same_targets(target: Any) -> None:
    """`Budget(target=inf)` and the like are a `BudgetError`, never an arithmetic error."""
    with pytest.raises(BudgetError, match="target must be"):
        Budget(window=1000, target=target)


# -- 2. the newest step always stays ------------------------------------------------------------
@pytest.mark.guarantee("window-drops-oldest-whole")
@pytest.mark.parametrize("keep_steps", [0, -1, True, "1", 1.0])
def test_a_budget_that_would_let_the_newest_step_go_is_refused(keep_steps: Any) -> None:
    """`Budget(keep_steps=0)` (or a value that is no whole number) is a `BudgetError` that says
    why: the newest step is never compacted."""
    with pytest.raises(BudgetError, match=r"keep_steps .*newest step"):
        Budget(window=8000, keep_steps=keep_steps)


@pytest.mark.guarantee("window-drops-oldest-whole")
@pytest.mark.parametrize("make", [SlidingWindow, Summarize, ClearToolResults])
def test_no_rung_takes_keep_steps_zero(make: Any) -> None:
    """`SlidingWindow`, `Summarize` and `ClearToolResults` refuse `keep_steps=0` the same way."""
    with pytest.raises(ConfigurationError, match=r"keep_steps .*newest step"):
        make(keep_steps=0)


# -- 3. listeners that raise -------------------------------------------------------------------
def broken(what: object) -> None:
    raise RuntimeError("the dashboard is down")


@pytest.mark.guarantee("run-reported")
@pytest.mark.guarantee("auto-trigger-isolates-failures")
@pytest.mark.parametrize("listener", ["on_report", "on_start"])
def test_a_raising_listener_never_breaks_the_automatic_trigger(
    listener: str, caplog: pytest.LogCaptureFixture
) -> None:
    """In `maybe_compact`, an `on_report` or `on_start` that raises is logged and named in the
    report's error; the run lands and its report is returned."""
    session = session_with(over())
    with caplog.at_level(logging.WARNING, logger="ctxfold.compactor"):
        report = compactor(**{listener: broken}).maybe_compact(session)
    assert report is not None and report.landed
    assert report.error == f"{listener} raised RuntimeError: the dashboard is down"
    assert compactions(session) >= 1
    assert "the dashboard is down" in caplog.text


@pytest.mark.guarantee("run-reported")
@pytest.mark.parametrize("listener", ["on_report", "on_start"])
async def test_the_async_trigger_isolates_a_raising_listener_too(listener: str) -> None:
    """`amaybe_compact` isolates a raising `on_report` or `on_start` the same way."""
    report = await compactor(**{listener: broken}).amaybe_compact(session_with(over()))
    assert report is not None and report.landed
    assert report.error is not None and "the dashboard is down" in report.error


@pytest.mark.guarantee("run-reported")
def test_overflow_recovery_isolates_a_raising_listener() -> None:
    """`recover_from_overflow` is part of the agent's turn: a raising `on_report` is reported
    there too, and the history still shrinks."""
    report = compactor(on_report=broken).recover_from_overflow(session_with(over()))
    assert report.landed
    assert report.error is not None and "on_report raised" in report.error


@pytest.mark.guarantee("run-reported")
@pytest.mark.parametrize("listener", ["on_report", "on_start"])
def test_a_manual_compact_raises_what_a_listener_raised(listener: str) -> None:
    """A manual `compact()` raises a listener's error, as it does a summarizer's: a raising
    `on_start` stops the run before anything is written, a raising `on_report` after the run
    landed."""
    session = session_with(over())
    with pytest.raises(RuntimeError, match="the dashboard is down"):
        compactor(**{listener: broken}).compact(session)
    assert (compactions(session) > 0) is (listener == "on_report")


class FailsOnce:
    """A summarizer that raises on its first call and answers after."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: SummaryRequest) -> str:
        self.calls += 1
        if self.calls == 1:
            raise TimeoutError("the model timed out")
        return SHORT


def finish_background_runs() -> None:
    for thread in threading.enumerate():
        if thread.name.startswith("ctxfold-background"):
            thread.join(10)
            assert not thread.is_alive()


@pytest.mark.guarantee("run-reported")
@pytest.mark.guarantee("background-failures-reported")
def test_a_raising_on_report_loses_no_report_of_a_background_check() -> None:
    """When one check settles several runs (a failed background run, then a foreground run past
    the hard mark), a raising `on_report` still hears every one of them, and the check returns
    the last."""
    heard: list[CompactionReport] = []

    def record_then_raise(report: CompactionReport) -> None:
        heard.append(report)
        raise RuntimeError("the dashboard is down")

    budget = Budget(window=3000, keep_recent_tokens=0, keep_user_tokens=0)
    session = session_with(agent_history(turns=3, output_words=200))
    with Compactor(
        budget,
        [Summarize()],
        summarizer=FailsOnce(),
        counter=COUNTER,
        on_report=record_then_raise,
        background=Background(overshoot=0.5),
    ) as c:
        assert c.maybe_compact(session) is None  # a run starts off the turn, and fails there
        finish_background_runs()
        session.append(step("big", 800))
        report = c.maybe_compact(session)
    assert [r.outcome for r in heard] == ["failed", "landed"]
    assert report is not None and report.landed
    assert report.error is not None and "on_report raised" in report.error


@pytest.mark.guarantee("run-reported")
def test_a_raising_on_start_in_a_background_run_does_not_fail_it() -> None:
    """An `on_start` that raises in a background run's thread is reported with the run, which
    still lands at the next check."""
    budget = Budget(window=3000, keep_recent_tokens=0, keep_user_tokens=0)
    session = session_with(agent_history(turns=3, output_words=200))
    with compactor(budget=budget, on_start=broken, background=Background(overshoot=0.5)) as c:
        c.maybe_compact(session)
        finish_background_runs()
        report = c.maybe_compact(session)
    assert report is not None and report.landed
    assert report.error == "on_start raised RuntimeError: the dashboard is down"


# -- 4. the compactor's configuration ----------------------------------------------------------
def test_a_list_of_strategies_is_a_pipeline() -> None:
    """`Compactor(pipeline=[...])` runs that ladder, as `Pipeline([...])` would."""
    c = compactor(pipeline=[ClearToolResults(min_tokens=0), Summarize()])
    assert [s.name for s in c.pipeline.strategies] == ["clear_tool_results", "summarize"]
    assert c.compact(session_with(over())).landed


@pytest.mark.parametrize(
    ("argument", "value"),
    [
        ("pipeline", 5),
        ("pipeline", "summarize"),
        ("summarizer", 5),
        ("counter", 5),
        ("on_compact", 5),
        ("redact", 5),
        ("tools", 5),
        ("tools", {"name": "bash"}),
        ("on_start", 5),
        ("on_report", 5),
        ("on_trim", 5),
        ("should_compact", 5),
        ("summary_role", ["user"]),
        ("summary_role", "tool"),
        ("background", "yes"),
    ],
)
def test_a_configuration_value_of_the_wrong_kind_is_refused_at_once(
    argument: str, value: object
) -> None:
    """A compactor given what it cannot use raises `ConfigurationError` naming the argument
    when it is made, not a built-in error at its first check."""
    with pytest.raises(
        ConfigurationError, match=argument if argument != "pipeline" else "Pipeline"
    ):
        Compactor(BUDGET, **{argument: value})


@pytest.mark.guarantee("budget-live-and-validated")
def test_setting_a_budget_that_is_no_budget_is_refused_and_the_old_one_stays() -> None:
    """`compactor.budget = 4000` is a `BudgetError` at once, pointing to `Budget(window=...)`; the
    compactor keeps its budget and goes on working."""
    c = compactor()
    with pytest.raises(BudgetError, match=r"Budget\(window="):
        c.budget = 4000  # type: ignore[assignment]
    assert c.budget is BUDGET
    assert c.maybe_compact(session_with(over())) is not None
    c.budget = None
    assert c.maybe_compact(session_with(over())) is None


def test_a_counter_named_by_a_string_is_the_counter_of_that_name() -> None:
    """`Compactor(counter="cl100k_base")` counts with `ctxfold.tokens.counter("cl100k_base")`."""
    assert Compactor(BUDGET, counter="cl100k_base").counter.name == counter("cl100k_base").name
    assert Compactor(BUDGET, counter="heuristic").counter.name == counter("heuristic").name


@pytest.mark.parametrize("spec", [None, 5, FixedCounter()])
def test_counter_takes_only_a_name(spec: object) -> None:
    """`ctxfold.tokens.counter(spec)` refuses what is no name with a `ConfigurationError`."""
    with pytest.raises(ConfigurationError, match="counter"):
        counter(spec)  # type: ignore[arg-type]


# -- 5. Budget.for_model -----------------------------------------------------------------------
@pytest.mark.guarantee("model-catalog-window")
@pytest.mark.parametrize("model", [None, 5, "", "  "])
def test_for_model_needs_a_model_name(model: object) -> None:
    """`Budget.for_model` given no model name is a `BudgetError` that says what to pass."""
    with pytest.raises(BudgetError, match="model name"):
        Budget.for_model(model)  # type: ignore[arg-type]


def test_for_model_names_an_unknown_keyword_and_lists_the_fields() -> None:
    """A misspelt override is a `ConfigurationError` that names it and lists the accepted ones."""
    with pytest.raises(ConfigurationError, match=r"'windw'.*window, max_output"):
        Budget.for_model("gpt-4o", windw=1)


# -- 6. overflow and should_compact -------------------------------------------------------------
@pytest.mark.parametrize("value", [5, "maximum context length", None, {"code": 400}])
def test_what_is_no_exception_is_no_context_overflow(value: object) -> None:
    """`is_context_overflow` is a predicate: anything that is not an exception is False."""
    assert ctxfold.is_context_overflow(value) is False  # type: ignore[arg-type]


@pytest.mark.guarantee("overflow-recovery")
def test_overflow_recovery_refuses_an_error_that_is_no_exception() -> None:
    """`recover_from_overflow(error=5)` is a `ConfigurationError`, and no overflow is recorded."""
    session = session_with(over())
    with pytest.raises(ConfigurationError, match="error must be the exception"):
        compactor().recover_from_overflow(session, error=5)  # type: ignore[arg-type]
    assert session.overflows() == 0
    assert compactions(session) == 0


def test_should_compact_takes_one_message_or_none_as_what_is_added() -> None:
    """`adding=None` adds nothing, and a single `Message` counts as a list of one."""
    c = compactor()
    session = session_with(agent_history(2, output_words=200, task_steps=3))
    big = Message("user", " ".join(f"w{i}" for i in range(2000)))
    assert c.should_compact(session, adding=None) is c.should_compact(session) is False
    assert c.should_compact(session, adding=big) is c.should_compact(session, adding=[big]) is True


@pytest.mark.parametrize("adding", [[{"role": "user", "content": "hi"}], {"role": "user"}, 5])
def test_should_compact_refuses_provider_dicts_with_a_pointer_to_the_readers(
    adding: object,
) -> None:
    """A provider's dicts as `adding` are an `InvalidInputError` pointing to `from_openai`."""
    with pytest.raises(InvalidInputError, match="adding"):
        compactor().should_compact(session_with(over()), adding=adding)  # type: ignore[arg-type]
    if adding != 5:
        with pytest.raises(InvalidInputError, match="from_openai or from_anthropic"):
            compactor().should_compact(session_with(over()), adding=adding)  # type: ignore[arg-type]


# -- 7. the ladder -------------------------------------------------------------------------------
def test_a_single_strategy_is_a_ladder_of_one_rung() -> None:
    """`Pipeline(ClearToolResults())` is `Pipeline([ClearToolResults()])`."""
    assert [s.name for s in Pipeline(ClearToolResults()).strategies] == ["clear_tool_results"]


@pytest.mark.parametrize("strategies", [None, 5, "summarize", [5]])
def test_a_pipeline_of_what_is_no_strategy_is_refused(strategies: object) -> None:
    """`Pipeline(None)` and the like are a `ConfigurationError` naming the value."""
    with pytest.raises(ConfigurationError, match=r"Pipeline takes|is not a Strategy"):
        Pipeline(strategies)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "setting"),
    [
        (lambda: ClearToolResults(keep_steps="x"), "keep_steps"),  # type: ignore[arg-type]
        (lambda: ClearToolResults(min_tokens="x"), "min_tokens"),  # type: ignore[arg-type]
        (lambda: SlidingWindow(keep_steps="x"), "keep_steps"),  # type: ignore[arg-type]
        (lambda: Summarize(keep_steps="x"), "keep_steps"),  # type: ignore[arg-type]
        (lambda: Summarize(summary_tokens="x"), "summary_tokens"),  # type: ignore[arg-type]
        (lambda: Summarize(max_stretch_tokens="x"), "max_stretch_tokens"),  # type: ignore[arg-type]
        (lambda: Summarize(ledger_share="x"), "ledger_share"),  # type: ignore[arg-type]
        (lambda: Summarize(redact=5), "redact"),  # type: ignore[arg-type]
        (lambda: Summarize("a summarizer"), "summarizer"),  # type: ignore[arg-type]
    ],
)
def test_a_strategy_setting_of_the_wrong_kind_is_refused(make: Any, setting: str) -> None:
    """A strategy given a setting it cannot use raises `ConfigurationError` naming it."""
    with pytest.raises(ConfigurationError, match=setting):
        make()


# -- 8. the model catalog ------------------------------------------------------------------------
@pytest.mark.guarantee("model-catalog-window")
@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-5-chat-latest", 128_000),
        ("gpt-5-chat", 128_000),
        ("openai/gpt-5.1-chat", 128_000),
        ("gpt-5.1-chat-latest", 128_000),
        ("gpt-5.2-chat-latest", 128_000),
        ("gpt-5.2-chat", 128_000),
        ("gpt-5.2", 400_000),
        ("gpt-5.2-2025-12-11", 400_000),
        ("gpt-3.5-turbo-instruct", 4_096),
        ("gpt-3.5-turbo-instruct-0914", 4_096),
        ("gpt-3.5-turbo-0125", 16_385),
        ("codestral-2405", 32_768),
        ("mistralai/Codestral-22B-v0.1", 32_768),
        ("codestral-2501", 256_000),
        ("codestral-latest", 256_000),
        ("meta-llama/Llama-3.3-70B-Instruct", 131_072),
        ("deepseek-chat", 128_000),
    ],
)
def test_a_variant_gets_its_own_window_not_its_base_models(model: str, window: int) -> None:
    """A chat or instruct variant, or an early release, gets the window of its own entry, and a
    dated snapshot that of its model."""
    assert Budget.for_model(model).window == window


@pytest.mark.guarantee("model-catalog-window")
def test_a_chat_variant_the_catalog_lacks_is_unknown_rather_than_too_large() -> None:
    """An OpenAI "-chat" model with no entry of its own never takes the larger window of the
    model it is named after: it needs `window=`."""
    with pytest.raises(BudgetError, match="unknown model"):
        Budget.for_model("gpt-5.4-chat-latest")
    assert Budget.for_model("gpt-5.4-chat-latest", window=128_000).window == 128_000
    assert Budget.for_model("gpt-5.4").window == 1_050_000


# -- 9. ranges the application summarizes --------------------------------------------------------
def compact_range_with(summarize: Any) -> Compactor:
    def on_compact(ctx: CompactionContext) -> None:
        ctx.compact(range(2, 6), summarize)

    return compactor(on_compact=on_compact, pipeline=Pipeline([]))


@pytest.mark.guarantee("auto-trigger-isolates-failures")
@pytest.mark.parametrize("answer", [b"x", 5, ["a"]])
def test_a_range_summary_that_is_no_text_is_refused_like_a_summarizers(answer: object) -> None:
    """A `summarize` function given to `ctx.compact` that answers bytes, a number or a list is a
    `SummarizerError` from `compact`, a failed run in the automatic trigger, and never a summary
    holding its repr."""
    session = session_with(over())
    with pytest.raises(SummarizerError, match=r"ctx\.compact.*returned"):
        compact_range_with(lambda messages: answer).compact(session)
    report = compact_range_with(lambda messages: answer).maybe_compact(session)
    assert report is not None and report.outcome == "failed"
    assert compactions(session) == 0


def test_a_range_summary_may_be_a_summary_result() -> None:
    """`summarize` may answer a `SummaryResult`, as a summarizer may; its text is the summary."""
    from ctxfold.summarizers import SummaryResult

    report = compact_range_with(lambda messages: SummaryResult(SHORT)).compact(session_with(over()))
    assert report.landed
    assert report.summaries and report.summaries[0].startswith(SHORT)


def test_a_string_given_as_the_summarize_function_is_refused() -> None:
    """`ctx.compact(range, "text")` is a `ConfigurationError` that says to pass a function."""
    with pytest.raises(ConfigurationError, match="summarize must be a function"):
        compact_range_with("the summary").compact(session_with(over()))


def test_the_result_of_compact_messages_unpacks_into_the_list_and_the_report() -> None:
    """``messages, report = compact_messages(...)`` works, as the README puts it."""
    from ctxfold import Budget, Message, compact_messages

    messages, report = compact_messages([Message("system", "S"), Message("user", "hi")],
                                        Budget(window=4_000))  # fmt: skip
    assert [m.role for m in messages] == ["system", "user"]
    assert report.outcome == "within-target"


@pytest.mark.parametrize("wait_s", [float("nan"), -1, True, "5"])
def test_a_background_wait_that_is_no_number_of_seconds_is_refused(wait_s: object) -> None:
    """Background(wait_s=...) takes 0 or more seconds; NaN, a bool or a string is refused."""
    from ctxfold.compactor.background import Background

    with pytest.raises(ConfigurationError, match="wait_s"):
        Background(wait_s=wait_s)  # type: ignore[arg-type]
