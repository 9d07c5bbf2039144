"""Images, documents and audio are counted as the providers bill them, never as characters.

Images are real headers built here: a PNG written with zlib, GIF and WebP headers, and a JPEG
whose frame header sits behind a large EXIF segment, as camera photos have.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from collections.abc import Callable

import pytest

from ctxfold import InvalidInputError
from ctxfold.messages import Message, from_anthropic, from_openai
from ctxfold.messages.media import attachments, media_part, with_media
from ctxfold.protocols import TokenCounter
from ctxfold.tokens import HeuristicCounter, Tally, TiktokenCounter
from ctxfold.tokens._media_data import image_size
from ctxfold.tokens.attachments import (
    ANTHROPIC_MAX_IMAGE,
    AUDIO_TOKENS_PER_SECOND,
    OPENAI_LOW_DETAIL,
    OPENAI_UNKNOWN_IMAGE,
    PAGE_TOKENS,
    UNSEEN_DOCUMENT_TOKENS,
    anthropic_image_tokens,
    attachment_tokens,
    measure,
    openai_image_tokens,
)
from tests._media import png

COUNTERS: list[Callable[[], TokenCounter]] = [HeuristicCounter, TiktokenCounter]


def jpeg_header(width: int, height: int, exif: int) -> bytes:
    """The start of a JPEG: JFIF, an EXIF segment of `exif` bytes, then the frame header."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    segments = b""
    left = exif
    while left > 0:  # one segment holds at most 65,533 bytes
        size = min(left, 65_000)
        segments += b"\xff\xe1" + struct.pack(">H", size + 2) + b"E" * size
        left -= size
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + segments + sof + b"\xff\xda"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def openai_image(url: str, detail: str | None = None, text: str = "what is in it?") -> Message:
    spec: dict[str, str] = {"url": url}
    if detail is not None:
        spec["detail"] = detail
    parts = [{"type": "text", "text": text}, {"type": "image_url", "image_url": spec}]
    return from_openai([{"role": "user", "content": parts}])[0]


def anthropic_image(source: dict[str, str], text: str = "what is in it?") -> Message:
    blocks = [{"type": "text", "text": text}, {"type": "image", "source": source}]
    return from_anthropic([{"role": "user", "content": blocks}])[0]


def extra_tokens(counter: TokenCounter, message: Message) -> int:
    """What the attachments add: the message's count minus that of its text alone."""
    return counter.count_message(message) - counter.count_message(Message("user", message.text))


@pytest.mark.parametrize("make", COUNTERS)
def test_a_400_kb_image_costs_its_tiles_not_its_characters(
    make: Callable[[], TokenCounter],
) -> None:
    """The defect: a 400 KB base64 image counted as 7 tokens. It now costs what OpenAI bills for
    its size (85 + 170 per tile), and the same whether its file is 4 KB or 400 KB."""
    counter = make()
    big = openai_image("data:image/png;base64," + b64(png(2000, 1500, padding=300_000)))
    small = openai_image("data:image/png;base64," + b64(png(2000, 1500)))
    assert len(big.extra["openai"]["parts"][1]["image_url"]["url"]) > 400_000
    assert extra_tokens(counter, big) == openai_image_tokens(2000, 1500)
    assert counter.count_message(big) == counter.count_message(small)
    # 2000x1500 -> shorter side 768 -> 1024x768 -> 2x2 tiles.
    assert openai_image_tokens(2000, 1500) == 85 + 170 * 4


@pytest.mark.parametrize("make", COUNTERS)
def test_anthropic_images_cost_pixels_over_750(make: Callable[[], TokenCounter]) -> None:
    """An Anthropic image block costs width x height / 750 tokens after the API's downscaling,
    at most 1,600; the same image in OpenAI shape costs OpenAI's price."""
    counter = make()
    data = b64(png(1000, 600))
    message = anthropic_image({"type": "base64", "media_type": "image/png", "data": data})
    assert extra_tokens(counter, message) == math.ceil(1000 * 600 / 750)
    huge = anthropic_image(
        {"type": "base64", "media_type": "image/png", "data": b64(png(4000, 3000))}
    )
    assert extra_tokens(counter, huge) == ANTHROPIC_MAX_IMAGE
    assert anthropic_image_tokens(4000, 3000) == ANTHROPIC_MAX_IMAGE


@pytest.mark.parametrize("make", COUNTERS)
def test_images_of_unknown_size_cost_the_most_their_provider_charges(
    make: Callable[[], TokenCounter],
) -> None:
    """An image by URL has no header to read: it costs the largest price of its provider's
    rule, unless OpenAI's low detail fixes the price at 85."""
    counter = make()
    url = "https://example.com/screenshot.png"
    assert extra_tokens(counter, openai_image(url)) == OPENAI_UNKNOWN_IMAGE
    assert extra_tokens(counter, openai_image(url, detail="auto")) == OPENAI_UNKNOWN_IMAGE
    assert extra_tokens(counter, openai_image(url, detail="low")) == OPENAI_LOW_DETAIL
    by_url = anthropic_image({"type": "url", "url": url})
    assert extra_tokens(counter, by_url) == ANTHROPIC_MAX_IMAGE
    unreadable = openai_image("data:image/png;base64,bm90IGFuIGltYWdl")
    assert extra_tokens(counter, unreadable) == OPENAI_UNKNOWN_IMAGE


def test_dimensions_are_read_from_png_gif_webp_and_jpeg_headers() -> None:
    """Each format's header gives its size; a JPEG whose frame header sits 200 KB in, behind its
    EXIF data, is read too."""
    gif = b"GIF89a" + struct.pack("<HH", 320, 200) + b"\x00" * 20
    vp8x = b"RIFF\x00\x00\x00\x00WEBPVP8X" + b"\x0a\x00\x00\x00" + b"\x00" * 4 + (
        799).to_bytes(3, "little") + (599).to_bytes(3, "little")  # fmt: skip
    vp8l_bits = (1023 - 1) | ((511 - 1) << 14)
    vp8l = b"RIFF\x00\x00\x00\x00WEBPVP8L" + b"\x00" * 4 + b"\x2f" + vp8l_bits.to_bytes(4, "little")
    assert image_size(b64(png(640, 480))) == (640, 480)
    assert image_size(b64(gif)) == (320, 200)
    assert image_size(b64(vp8x)) == (800, 600)
    assert image_size(b64(vp8l)) == (1023, 511)
    assert image_size(b64(jpeg_header(3024, 4032, exif=10_000))) == (3024, 4032)
    assert image_size(b64(jpeg_header(3024, 4032, exif=200_000))) == (3024, 4032)
    assert image_size(b64(b"plain text, not an image")) is None
    assert image_size("%%% not base64 %%%") is None


@pytest.mark.parametrize("make", COUNTERS)
def test_an_image_in_a_tool_result_counts(make: Callable[[], TokenCounter]) -> None:
    """A screenshot a tool returns (an Anthropic tool_result holding an image block) counts."""
    counter = make()
    data = b64(png(1200, 800))
    rows = [
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "screenshot", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "text", "text": "page loaded"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": data}}]}]},
    ]  # fmt: skip
    result = from_anthropic(rows)[1]
    plain = Message("tool", result.text, tool_call_id="t1")
    added = counter.count_message(result) - counter.count_message(plain)
    assert added == math.ceil(1200 * 800 / 750)


@pytest.mark.parametrize("make", COUNTERS)
def test_an_attachment_stops_counting_once_its_text_is_replaced(
    make: Callable[[], TokenCounter],
) -> None:
    """When a strategy replaces a message's text (a cleared tool result, say), the adapters no
    longer send its old parts, and the count drops with them."""
    counter = make()
    message = openai_image("data:image/png;base64," + b64(png(1024, 1024)))
    assert len(attachments(message)) == 1
    cleared = message.replace(content="[image cleared]")
    assert attachments(cleared) == []
    assert counter.count_message(cleared) == counter.count_message(Message("user", cleared.text))


def _pdf(pages: int) -> bytes:
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [] /Count %d >>" % pages]  # fmt: skip
    objects += [b"<< /Type /Page /Parent 2 0 R >>"] * pages
    body = b"".join(b"%d 0 obj\n%s\nendobj\n" % (n, o) for n, o in enumerate(objects, 1))
    return b"%PDF-1.4\n" + body + b"%%EOF\n"


@pytest.mark.parametrize("make", COUNTERS)
def test_documents_are_counted_per_page_or_conservatively(make: Callable[[], TokenCounter]) -> None:
    """A PDF costs 3,000 tokens a page (its pages read from the file); a document by URL or
    file id costs a fixed conservative amount; a plain-text document counts as its text."""
    counter = make()
    pdf = b64(_pdf(3))
    anthropic = from_anthropic([{"role": "user", "content": [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                        "data": pdf}}]}])[0]  # fmt: skip
    pdf_url = "data:application/pdf;base64," + pdf
    openai = from_openai([{"role": "user", "content": [
        {"type": "file", "file": {"filename": "a.pdf", "file_data": pdf_url}}]}])[0]  # fmt: skip
    by_id = from_openai([{"role": "user", "content": [
        {"type": "file", "file": {"file_id": "file-abc"}}]}])[0]  # fmt: skip
    text = "The contract runs until 2031. " * 40
    plain = from_anthropic([{"role": "user", "content": [
        {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                        "data": text}}]}])[0]  # fmt: skip
    empty = Message("user", None)
    for message, expected in [
        (anthropic, 3 * PAGE_TOKENS),
        (openai, 3 * PAGE_TOKENS),
        (by_id, UNSEEN_DOCUMENT_TOKENS),
        (plain, counter.count_text(text)),
    ]:
        assert counter.count_message(message) - counter.count_message(empty) == expected


@pytest.mark.parametrize("make", COUNTERS)
def test_audio_costs_its_seconds(make: Callable[[], TokenCounter]) -> None:
    """Audio input costs 10 tokens a second; a WAV file's length comes from its header."""
    counter = make()
    rate, seconds = 16_000, 3
    samples = b"\x00\x00" * rate * seconds
    wav = b"RIFF" + struct.pack("<I", 36 + len(samples)) + b"WAVEfmt " + struct.pack(
        "<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16) + b"data" + struct.pack("<I", len(samples)
    ) + samples  # fmt: skip
    audio = {"type": "input_audio", "input_audio": {"data": b64(wav), "format": "wav"}}
    message = from_openai([{"role": "user", "content": [audio]}])[0]
    expected = math.ceil(len(wav) / (rate * 2) * AUDIO_TOKENS_PER_SECOND)
    assert counter.count_message(message) - counter.count_message(Message("user", None)) == expected
    assert expected == seconds * AUDIO_TOKENS_PER_SECOND + 1  # the 44 header bytes round up


def test_a_session_tally_sees_the_image() -> None:
    """The running total a session keeps includes the image's price, so the budget sees it."""
    tally = Tally(HeuristicCounter())
    tally.add(1, Message("user", "what is in it?"))
    before = tally.total
    tally.add(2, anthropic_image({"type": "url", "url": "https://example.com/a.png"}, text=""))
    assert tally.total - before >= ANTHROPIC_MAX_IMAGE


@pytest.mark.parametrize("make", COUNTERS)
def test_a_media_record_costs_what_the_same_part_costs_through_the_openai_adapter(
    make: Callable[[], TokenCounter],
) -> None:
    """A message made outside the adapters (as the integrations make them) whose media is
    recorded with `with_media` is priced like the same part read by `from_openai`, after a trip
    through the log's JSON too; once its text is replaced (a cleared result), the stale media is
    no longer counted."""
    counter = make()
    url = "data:image/png;base64," + b64(png(2000, 1500, padding=300_000))
    made = with_media(Message("user", "what is in it?"), [measure(media_part("image", url=url))])
    stored = Message.from_dict(json.loads(json.dumps(made.to_dict())))
    assert "base64" not in made.text
    for message in (made, stored):
        assert counter.count_message(message) == counter.count_message(openai_image(url))
    cleared = stored.replace(content="[cleared]")
    assert attachments(cleared) == []
    assert counter.count_message(cleared) == counter.count_message(Message("user", "[cleared]"))


def test_media_parts_take_data_urls_and_references() -> None:
    """`media_part` gives the Chat Completions part each kind is priced as: base64 data becomes
    a data: URL, a document by URL or id and audio by reference keep what names them."""
    assert media_part("image", data="iVBO", media_type="image/png") == {
        "type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}  # fmt: skip
    assert media_part("document", url="https://example.com/a.pdf", filename="a.pdf") == {
        "type": "file", "file": {"file_url": "https://example.com/a.pdf", "filename": "a.pdf"}
    }  # fmt: skip
    assert media_part("audio", url="data:audio/mpeg;base64,SUQz") == {
        "type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}}  # fmt: skip
    assert media_part("audio", url="https://example.com/a.mp3") == {
        "type": "input_audio", "input_audio": {"url": "https://example.com/a.mp3"}}  # fmt: skip
    message = Message("tool", "", tool_call_id="c1")
    assert with_media(message, []) is message


def test_a_content_part_given_for_measured_facts_is_refused() -> None:
    """`with_media` takes measured facts: a content part (which it would never count) is refused
    with an error that says to measure it, and `measure` refuses a part that is no media."""
    part = media_part("image", url="https://example.com/a.png")
    with pytest.raises(InvalidInputError, match="measure"):
        with_media(Message("user", "hi"), [part])
    with pytest.raises(InvalidInputError, match="'text'"):
        measure({"type": "text", "text": "no media"})


def wav(seconds: int, rate: int = 16_000) -> bytes:
    samples = b"\x00\x00" * rate * seconds
    return b"RIFF" + struct.pack("<I", 36 + len(samples)) + b"WAVEfmt " + struct.pack(
        "<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16) + b"data" + struct.pack("<I", len(samples)
    ) + samples  # fmt: skip


@pytest.mark.parametrize("make", COUNTERS)
def test_a_media_record_holds_what_its_media_costs_not_its_data(
    make: Callable[[], TokenCounter],
) -> None:
    """The log keeps inline media once: the record of a 260 KB image, a PDF and a WAV clip
    beside a 20 KB text is under 1 KB of JSON and holds none of their data nor the text, yet
    each part costs what it costs through the OpenAI adapter. A URL is kept whole, however
    long."""
    counter = make()
    text = "Compare these. " * 1_400
    image = "data:image/png;base64," + b64(png(1024, 1024, padding=260_000))
    parts = [
        media_part("image", url=image, detail="auto"),
        media_part("document", data=b64(_pdf(3)), media_type="application/pdf"),
        media_part("audio", data=b64(wav(2)), media_type="audio/wav"),
        media_part("image", url="https://example.com/" + "a" * 5_000 + ".png"),
    ]
    made = with_media(Message("user", text), [measure(p) for p in parts])
    logged = json.dumps(made.to_dict()["extra"]["media"])
    assert len(image) > 260_000
    assert len(logged.replace("a" * 5_000, "")) < 1_000
    assert image[100:200] not in logged
    assert "Compare these" not in logged
    stored = Message.from_dict(json.loads(json.dumps(made.to_dict())))
    for part in parts:
        alone = with_media(Message("user", text), [measure(part)])
        through_adapter = from_openai([{"role": "user", "content": [
            {"type": "text", "text": text}, part]}])[0]  # fmt: skip
        assert counter.count_message(alone) == counter.count_message(through_adapter)
    assert attachment_tokens(stored, len) == sum(
        attachment_tokens(with_media(Message("user", text), [measure(p)]), len) for p in parts
    )
    assert attachment_tokens(stored.replace(content=text + "!"), len) == 0


def test_a_hand_written_record_of_the_wrong_shape_is_ignored_or_priced_by_defaults() -> None:
    """A media record in a log written by hand never raises while counting: a record of the
    wrong shape is ignored, and a fact of the wrong type or out of range (a string, a boolean,
    a negative, NaN, infinity, a number past 2**53) is priced by the default for what it would
    have said."""
    digest = with_media(Message("user", "hi"), [{"type": "image"}]).extra["media"]["text_digest"]

    def tokens(record: str) -> int:
        row = f'{{"role": "user", "content": "hi", "extra": {{"media": {record}}}}}'
        return attachment_tokens(Message.from_dict(json.loads(row)), len)

    def facts(*parts: str) -> int:
        return tokens(f'{{"text_digest": "{digest}", "parts": [{", ".join(parts)}]}}')

    assert tokens('"image"') == tokens('{"parts": [{"type": "image"}]}') == 0
    assert tokens('{"text_digest": 7, "parts": [{"type": "image"}]}') == 0
    assert tokens(f'{{"text_digest": "{digest}", "parts": {{"type": "image"}}}}') == 0
    assert facts('1, null, "image", {"type": ["image"]}, {"type": "video"}, {}') == 0
    for width in ('"1024"', "true", "-1", "0", "1e400", "NaN", str(2**60), "1024.0"):
        image = f'{{"type": "image", "width": {width}, "height": 1024}}'
        assert facts(image) == OPENAI_UNKNOWN_IMAGE, width
    assert facts('{"type": "image", "width": 1024, "height": 1024, "detail": ["low"]}') == 765
    assert facts('{"type": "image", "detail": "low", "width": "x"}') == OPENAI_LOW_DETAIL
    for pages in ('"3"', "0", "NaN", "3.0", str(2**60)):
        assert facts(f'{{"type": "document", "pages": {pages}}}') == UNSEEN_DOCUMENT_TOKENS
        assert facts(f'{{"type": "document", "pages": {pages}, "bytes": 150000}}') == 9_000
    assert facts('{"type": "document", "pages": 2, "bytes": "many"}') == 2 * PAGE_TOKENS
    for seconds in ('"2"', "-1", "NaN", "Infinity", "1e400", "true"):
        assert facts(f'{{"type": "audio", "seconds": {seconds}}}') == 0, seconds
        assert facts(f'{{"type": "audio", "seconds": {seconds}, "bytes": 8000}}') == 20
    assert facts('{"type": "audio", "seconds": 2.5}', '{"type": "audio", "seconds": 3}') == 55
