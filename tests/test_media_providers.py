"""A media record is priced by the rules of the provider it names, and a record that names none
is priced exactly as before: as OpenAI bills it."""

from __future__ import annotations

import json

import pytest

from ctxfold import InvalidInputError, Message
from ctxfold.messages.media import attachments, with_media
from ctxfold.tokens import attachments as pricing
from ctxfold.tokens.attachments import (
    ANTHROPIC_MAX_IMAGE,
    OPENAI_UNKNOWN_IMAGE,
    PAGE_TOKENS,
    anthropic_image_tokens,
    measured_tokens,
)
from tests._media import HTTPS_URL, anthropic_user, count

IMAGE = {"type": "image", "width": 1024, "height": 1024, "bytes": 301_234}


def test_an_image_sent_to_anthropic_costs_what_anthropic_bills() -> None:
    """Facts that name Anthropic price a 1024 x 1024 image at its pixels / 750 (1,399 tokens,
    where OpenAI's tiles give 765), and one of unknown size at Anthropic's most (1,600)."""
    assert measured_tokens({**IMAGE, "provider": "anthropic"}) == 1_399
    assert measured_tokens({**IMAGE, "provider": "anthropic"}) == anthropic_image_tokens(1024, 1024)
    unseen = {"type": "image", "url": HTTPS_URL, "provider": "anthropic"}
    assert measured_tokens(unseen) == ANTHROPIC_MAX_IMAGE
    # Anthropic has no detail setting: "low" does not make its image cheaper.
    assert measured_tokens({**IMAGE, "detail": "low", "provider": "anthropic"}) == 1_399


def test_a_record_that_names_no_provider_costs_what_it_always_did() -> None:
    """A record made before ctxfold recorded a provider, or by a maker that could not tell,
    and one whose provider is not a value ctxfold knows, price as OpenAI bills them."""
    for facts in (IMAGE, {**IMAGE, "provider": "openai"}, {**IMAGE, "provider": "gemini"}):
        assert measured_tokens(facts) == 765
    assert measured_tokens({"type": "image", "url": HTTPS_URL}) == OPENAI_UNKNOWN_IMAGE
    assert measured_tokens({**IMAGE, "detail": "low"}) == 85
    logged = json.loads(
        '{"role": "user", "content": "what is this?", "extra": {"media": {"text_digest":'
        ' "placeholder", "parts": [{"type": "image", "width": 1024, "height": 1024}]}}}'
    )
    old = with_media(Message("user", logged["content"]), logged["extra"]["media"]["parts"])
    assert count([old]) - count([old.replace(extra={})]) == 765


def test_documents_and_audio_cost_the_same_whoever_reads_them() -> None:
    """Only an image's price depends on the provider: a PDF costs its pages, audio its
    seconds, by the one rule for each."""
    for provider in ("openai", "anthropic"):
        assert measured_tokens({"type": "document", "pages": 2, "provider": provider}) == (
            2 * PAGE_TOKENS
        )
        assert measured_tokens({"type": "audio", "seconds": 3.0, "provider": provider}) == 30


def test_a_record_naming_anthropic_costs_what_the_anthropic_adapter_counts() -> None:
    """One rule per provider: the image recorded for Anthropic costs what the same image costs
    in a message read by `from_anthropic`."""
    reference = anthropic_user()
    recorded = with_media(Message("user", reference.content), [IMAGE], provider="anthropic")
    assert count([recorded]) == count([reference])
    assert [a.provider for a in attachments(recorded)] == ["anthropic"]


def test_with_media_records_the_provider_in_each_part_and_nothing_when_unknown() -> None:
    """`with_media(..., provider=...)` adds the provider to each part's facts (some 25 bytes);
    without one the record is exactly what it was."""
    message = Message("user", "two pictures")
    told = with_media(message, [IMAGE, IMAGE], provider="anthropic")
    assert [p["provider"] for p in told.extra["media"]["parts"]] == ["anthropic", "anthropic"]
    untold = with_media(message, [IMAGE])
    assert untold.extra["media"]["parts"] == [IMAGE]
    assert len(json.dumps(told.extra["media"])) < 400


def test_with_media_refuses_a_provider_it_cannot_price() -> None:
    """A provider other than "openai" or "anthropic" is an error naming the value."""
    with pytest.raises(InvalidInputError, match="'gemini'"):
        with_media(Message("user", "x"), [IMAGE], provider="gemini")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("names", "provider"),
    [
        (("claude-sonnet-4-5-20250929",), "anthropic"),
        (("anthropic/claude-3-5-sonnet-20240620",), "anthropic"),  # LiteLLM, routers
        (("us.anthropic.claude-sonnet-4-5-20250929-v1:0",), "anthropic"),  # Bedrock
        (("anthropic:claude-opus-9",), "anthropic"),  # newer than the catalog
        ((None, "anthropic"), "anthropic"),  # only the provider's name
        (("gpt-4o-2024-08-06",), "openai"),
        (("function:model:", None, "openai"), "openai"),
        (("gemini-2.5-pro", "openai"), None),  # a known model of neither decides
        (("function:model:",), None),
        ((), None),
    ],
)
def test_the_provider_of_a_model_as_frameworks_name_it(
    names: tuple[str | None, ...], provider: str | None
) -> None:
    """`media_provider` reads the provider from the model names and provider names frameworks
    report, and says None when they name neither OpenAI nor Anthropic."""
    assert pricing.media_provider(*names) == provider
