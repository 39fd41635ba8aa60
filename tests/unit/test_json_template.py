"""`JsonTemplate`: the startup fault's body encoded around its message is, byte for byte, what
`encode_json` makes of the model, and is refused as `encode_json` refuses it."""

from __future__ import annotations

import pytest

from session_journal import InvalidRecord, OutcomeReason, SessionFault, StoreOptions
from session_journal._validation import EncodedJson, JsonTemplate, encode_json
from session_journal.services.faults import _STARTUP_FAULT

MESSAGES = [
    "",
    "image pull failed: registry unreachable",
    'quotes " and backslashes \\ and a solidus /',
    "controls \n \r \t \b \f \x00 \x01 \x1f and DEL \x7f",
    "line separators \u2028 \u2029 and a BOM \ufeff",
    "accents é, CJK 漢字, an emoji 😀, a combining e\u0301",
    "brackets that look deep " + "[{" * 200,
    "x" * 10_000,
    "\x00session-journal: the open field\x00",  # the template's own marker
    "".join(chr(code) for code in range(128)),  # every ASCII character
    "".join(chr(code) for code in range(0x80, 0x800, 7)),  # two-byte characters, C1 controls
    "private use \ue000, noncharacters \ufffe \uffff, astral \U0010ffff",
]


def fault(message: str) -> SessionFault:
    return SessionFault(reason=OutcomeReason.STARTUP_FAILED, message=message)


@pytest.mark.parametrize("message", MESSAGES)
def test_the_filled_template_is_the_models_encoding(message: str) -> None:
    filled = _STARTUP_FAULT.fill(message, "startup fault", StoreOptions().max_body_bytes)
    assert isinstance(filled, EncodedJson)
    assert filled == encode_json(fault(message), "startup fault", StoreOptions().max_body_bytes)
    assert SessionFault.model_validate_json(filled) == fault(message)


@pytest.mark.parametrize(
    ("message", "max_bytes"),
    [
        ("lone surrogate \ud800 here", 1 << 20),
        ("é" * 600, 1_000),  # 1,200 bytes encoded: over, though 600 characters are not
    ],
)
def test_a_message_the_model_refuses_is_refused_with_the_same_words(
    message: str, max_bytes: int
) -> None:
    with pytest.raises(InvalidRecord) as expected:
        encode_json(fault(message), "startup fault", max_bytes)
    with pytest.raises(InvalidRecord) as refused:
        _STARTUP_FAULT.fill(message, "startup fault", max_bytes)
    assert str(refused.value) == str(expected.value)


def test_a_template_whose_field_is_not_one_string_is_refused_when_made() -> None:
    with pytest.raises(ValueError, match="not one string of the encoding"):
        JsonTemplate(lambda text: fault("fixed"))  # the text never reaches the encoding
