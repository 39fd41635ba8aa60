"""Redaction rules: secret keys, secret shapes in strings, JSON inside strings (no I/O)."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from session_journal import InvalidRecord
from session_journal.journal.redaction import REDACTED, Redactor

REDACTOR = Redactor()

# Realistic-looking but fake credentials.
OPENAI_KEY = "sk-proj-Xf3kP9qLm2Rt7vWz1Yb4Nc8Hd6Gj0Ks5Ua_TeQ-oIr"
LEGACY_OPENAI_KEY = "sk-4fK9xQ2mLp7Rt1vWz3Yb8Nc6Hd0GjKs5"
GITHUB_PAT_CLASSIC = "ghp_R2kX9mQ7vLp4Tz8Wb1Nc6Hd3Gj0Ks5Ya7Ue2"
GITHUB_PAT_FINE = "github_pat_11ABCDEFG0aBcDeFgHiJkL_mNoPqRsTuVwXyZ0123456789abcdEFGHijklMNOP"
AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SESSION_KEY_ID = "ASIAY34FZKBOKMUTVV7A"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM_BODY = (
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
)
PEM_RSA = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}-----END RSA PRIVATE KEY-----"

SECRETS = [
    OPENAI_KEY,
    LEGACY_OPENAI_KEY,
    GITHUB_PAT_CLASSIC,
    GITHUB_PAT_FINE,
    AWS_KEY_ID,
    JWT,
    PEM_RSA,
    "Bearer 8f14e45fceea167a5a36dedd4bea2543",
    "postgresql://journal:s3cr3t-P4ss@db.internal:5432/journal",
    "DB_PASSWORD=hunter2",
    "password: 'hunter 2'",
    "--api-key=abc123",
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"export OPENAI_API_KEY={OPENAI_KEY}", f"export OPENAI_API_KEY={REDACTED}"),
        (f"key: {LEGACY_OPENAI_KEY}.", f"key: {REDACTED}."),
        (f"token {GITHUB_PAT_CLASSIC} expired", f"token {REDACTED} expired"),
        *[
            (f"GH={prefix}_aB3dE5gH7jK9mN1pQ3sT5vW7yZ", f"GH={REDACTED}")
            for prefix in ("gho", "ghu", "ghs", "ghr")
        ],
        (f"GITHUB_TOKEN={GITHUB_PAT_FINE}", f"GITHUB_TOKEN={REDACTED}"),
        (f"aws_access_key_id = {AWS_KEY_ID}", f"aws_access_key_id = {REDACTED}"),
        (f"id {AWS_SESSION_KEY_ID} (temporary)", f"id {REDACTED} (temporary)"),
        (f"cookie session={JWT}; Path=/", f"cookie session={REDACTED}; Path=/"),
        (
            "Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543",
            f"Authorization: Bearer {REDACTED}",
        ),
        (f"authorization: bearer {JWT}", f"authorization: bearer {REDACTED}"),
        (
            "curl -H 'Authorization: Bearer ya29.a0AfH6SMBx-kQ_1234' https://api.example.com",
            f"curl -H 'Authorization: Bearer {REDACTED}' https://api.example.com",
        ),
        (f"key:\n{PEM_RSA}\nafter", f"key:\n{REDACTED}\nafter"),
        (
            f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}-----END OPENSSH PRIVATE KEY-----\n",
            f"{REDACTED}\n",
        ),
        (f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}-----END PRIVATE KEY-----", REDACTED),
        (f"cut short: -----BEGIN EC PRIVATE KEY-----\n{PEM_BODY}", f"cut short: {REDACTED}"),
        (
            "postgresql://journal:s3cr3t-P4ss@db.internal:5432/journal",
            f"postgresql://journal:{REDACTED}@db.internal:5432/journal",
        ),
        ("redis://:hunter2@cache:6379/0", f"redis://:{REDACTED}@cache:6379/0"),
        (
            "clone https://bob:p@ss@git.example.com/repo.git now",
            f"clone https://bob:{REDACTED}@git.example.com/repo.git now",
        ),
    ],
)
def test_secret_shapes_in_strings_are_redacted(text: str, expected: str) -> None:
    assert REDACTOR.redact_json(text) == expected
    assert REDACTOR.redact_json({"output": text}) == {"output": expected}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password=hunter2", f"password={REDACTED}"),
        ("login with PASSWORD=hunter2 now", f"login with PASSWORD={REDACTED} now"),
        ("API_KEY=abc", f"API_KEY={REDACTED}"),
        ("export GITHUB_TOKEN=gh-not-a-pat-1", f"export GITHUB_TOKEN={REDACTED}"),
        (
            "AWS_SECRET_ACCESS_KEY = wJalrXUtnFEMI/K7MDENG/bPxRfiCY",
            f"AWS_SECRET_ACCESS_KEY = {REDACTED}",
        ),
        ("DB_PASSWORD: x", f"DB_PASSWORD: {REDACTED}"),
        (
            "env:\n  DB_PASSWORD: x\n  DB_USER: app",
            f"env:\n  DB_PASSWORD: {REDACTED}\n  DB_USER: app",
        ),
        ("set DB_PASSWORD: x first", f"set DB_PASSWORD: {REDACTED} first"),
        ("X-Api-Key: k-123", f"X-Api-Key: {REDACTED}"),
        ("Authorization: Basic dXNlcjpwYXNz", f"Authorization: Basic {REDACTED}"),
        ("client_secret=abc&grant_type=x", f"client_secret={REDACTED}&grant_type=x"),
        ("f(password=hunter2)", f"f(password={REDACTED})"),
        ("--db-password=s3cr3t --verbose", f"--db-password={REDACTED} --verbose"),
        ('password="hunter 2" user="bob"', f'password="{REDACTED}" user="bob"'),
        ("secret: 'a b', user: bob", f"secret: '{REDACTED}', user: bob"),
        ("spring.datasource.password=pw", f"spring.datasource.password={REDACTED}"),
        ("apiKey=xyz; token=q", f"apiKey={REDACTED}; token={REDACTED}"),
        # A setting inside the value of one whose key is no secret.
        ("pw: secret='x y'", f"pw: secret='{REDACTED}'"),
        ("opts=password=x", f"opts=password={REDACTED}"),
        # A search snippet's marks around the key or the value.
        ("...[password]=[hunter2] ...", f"...[password]={REDACTED} ..."),
        # A quoted key: a dict printed by Python, JSON cut short.
        (
            "{'password': 'hunter2pw', 'user': 'bob'}",
            f"{{'password': '{REDACTED}', 'user': 'bob'}}",
        ),
        (
            'config={"password": "hunter2pw", "x": 1} (trunc',
            f'config={{"password": "{REDACTED}", "x": 1}} (trunc',
        ),
        # A key at the start of a snippet, after its cut mark.
        ("...AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI x0", f"...AWS_SECRET_ACCESS_KEY={REDACTED} x0"),
        ("...password: hunter2 [deploy]", f"...password: {REDACTED} [deploy]"),
        # A shape in a kept value is still found.
        ("note=Bearer abc12345678 token=x", f"note=Bearer {REDACTED} token={REDACTED}"),
        (
            "url=redis://:hunter2@cache:6379/0 password=x",
            f"url=redis://:{REDACTED}@cache:6379/0 password={REDACTED}",
        ),
    ],
)
def test_settings_in_free_text_keep_the_key_and_lose_the_value(text: str, expected: str) -> None:
    assert REDACTOR.redact_json(text) == expected
    assert REDACTOR.redact_json({"output": text}) == {"output": expected}
    assert REDACTOR.redact_text(expected) == expected


@pytest.mark.parametrize(
    "text",
    [
        "token count: 5",
        "max_tokens=100",
        "token_count=5, input_tokens: 7",
        "tokens: 12",
        "def login(password: str) -> bool:",
        "{password: str}",
        "if password == expected:",
        "password != x and password >= y",
        "the password is long",
        "password=",
        'password=""',
        "passwordless=true",
        "https://example.com/reset?user=bob&lang=en",
        f"password={REDACTED}",
        f'password: "{REDACTED}"',
    ],
)
def test_settings_whose_key_is_no_secret_or_without_a_value_are_kept(text: str) -> None:
    # Beside a line that is redacted: only that line changes.
    given = f"{text}\nDB_PASSWORD=hunter2"
    assert REDACTOR.redact_json(given) == f"{text}\nDB_PASSWORD={REDACTED}"


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "PASSWORD",
        "Password",
        "passwd",
        "passwords",
        "secret",
        "Secret",
        "secrets",
        "token",
        "Token",
        "api_key",
        "API_KEY",
        "api-key",
        "apiKey",
        "ApiKey",
        "apikey",
        "APIKEY",
        "authorization",
        "Authorization",
        "Proxy-Authorization",
        "cookie",
        "Cookie",
        "Set-Cookie",
        "private_key",
        "privateKey",
        "client_secret",
        "clientSecret",
        "access_key",
        "x_api_key",
        "X-Api-Key",
        "x-apikey",
        "github_token",
        "GITHUB_TOKEN",
        "refresh_token",
        "accessToken",
        "aws_secret_access_key",
        "AWS_SECRET_ACCESS_KEY",
        "secret_key",
        "db_password",
        "OpenAIApiKey",
    ],
)
def test_secret_keys_are_redacted_whatever_the_value(key: str) -> None:
    assert REDACTOR.is_secret_key(key)
    for value in ["hunter2", 12345, None, True, ["a", "b"], {"nested": "x"}]:
        assert REDACTOR.redact_json({key: value}) == {key: REDACTED}


@pytest.mark.parametrize(
    "key",
    [
        "token_count",
        "tokenCount",
        "max_tokens",
        "maxTokens",
        "input_tokens",
        "output_tokens",
        "tokens_used",
        "tokens",
        "prompt_token_count",
        "max_token",
        "token_type",
        "token_limit",
        "secretary",
        "passwordless",
        "key",
        "author",
        "cookbook",
        "api",
    ],
)
def test_keys_that_only_resemble_secrets_are_kept(key: str) -> None:
    assert not REDACTOR.is_secret_key(key)
    assert REDACTOR.redact_json({key: 4096}) == {key: 4096}


def test_secrets_under_nested_keys_and_in_lists() -> None:
    value = {
        "tool": {"env": [{"name": "HOME", "value": "/home/dev"}, {"password": "x", "n": 1}]},
        "args": ["--verbose", f"--token={GITHUB_PAT_CLASSIC}", [f"deep {OPENAI_KEY}"]],
    }
    assert REDACTOR.redact_json(value) == {
        "tool": {"env": [{"name": "HOME", "value": "/home/dev"}, {"password": REDACTED, "n": 1}]},
        "args": ["--verbose", f"--token={REDACTED}", [f"deep {REDACTED}"]],
    }


def test_dicts_and_lists_are_redacted_in_place_and_returned() -> None:
    value = {"a": [f"Bearer {JWT}"]}
    inner = value["a"]
    assert REDACTOR.redact_json(value) is value
    assert inner == [f"Bearer {REDACTED}"]
    for scalar in [None, True, 3, 2.5]:
        assert REDACTOR.redact_json(scalar) == scalar


def test_json_inside_a_string_is_redacted_by_key_and_re_encoded_compactly() -> None:
    body = json.dumps({"headers": {"Authorization": "Basic dXNlcjpwYXNz"}, "url": "/v1/x"})
    assert REDACTOR.redact_json({"stdout": body}) == {
        "stdout": f'{{"headers":{{"Authorization":"{REDACTED}"}},"url":"/v1/x"}}'
    }
    assert REDACTOR.redact_json(f"  [1, {json.dumps(AWS_KEY_ID)}]") == f'[1,"{REDACTED}"]'


def test_json_inside_json_inside_a_string() -> None:
    innermost = json.dumps({"client_secret": "abc", "note": "ok"})
    middle = json.dumps({"payload": innermost, "n": 1})
    outer = {"type": "tool_result_msg", "result": json.dumps([middle])}
    redacted = REDACTOR.redact_json(outer)
    level1 = json.loads(redacted["result"])
    level2 = json.loads(level1[0])
    assert json.loads(level2["payload"]) == {"client_secret": REDACTED, "note": "ok"}
    assert level2["n"] == 1


def test_json_without_secrets_keeps_its_formatting_and_broken_json_gets_the_shapes() -> None:
    pretty = json.dumps({"model": "claude-3", "max_tokens": 1024}, indent=2)
    assert REDACTOR.redact_json(pretty) == pretty
    broken = f'{{"password": "{OPENAI_KEY}", oops'
    assert REDACTOR.redact_json(broken) == f'{{"password": "{REDACTED}", oops'


def test_envelope_fields_are_never_changed_only_at_the_top_level() -> None:
    envelope = {
        "seq": OPENAI_KEY,
        "ts": f"Bearer {JWT}",
        "type": AWS_KEY_ID,
        "token": "abc",
        "message": {"type": f"Bearer {JWT}", "seq": AWS_KEY_ID},
    }
    assert REDACTOR.redact_json(envelope) == {
        "seq": OPENAI_KEY,
        "ts": f"Bearer {JWT}",
        "type": AWS_KEY_ID,
        "token": REDACTED,
        "message": {"type": f"Bearer {REDACTED}", "seq": REDACTED},
    }


def test_extra_keys_and_extra_patterns() -> None:
    redactor = Redactor(
        extra_patterns=[r"ACME-[0-9]{6}", re.compile(r"(?i)internal-[a-f0-9]{8}")],
        extra_keys=["session-cookie-id", "pin"],
    )
    value = {
        "sessionCookieId": "s1",
        "card_pin": 1234,
        "pinned": True,
        "text": "ticket ACME-123456 and Internal-deadbeef, not ACME-12",
        "password": "still redacted",
    }
    assert redactor.redact_json(value) == {
        "sessionCookieId": REDACTED,
        "card_pin": REDACTED,
        "pinned": True,
        "text": f"ticket {REDACTED} and {REDACTED}, not ACME-12",
        "password": REDACTED,
    }
    plain = {"pin": 1, "text": "ticket ACME-123456"}
    assert REDACTOR.redact_json(copy.deepcopy(plain)) == plain


def test_a_pattern_matching_the_empty_string_is_refused() -> None:
    with pytest.raises(ValueError, match="empty string"):
        Redactor(extra_patterns=["x*"])


def test_deep_nesting_does_not_raise() -> None:
    value: Any = {"password": "x"}
    for _ in range(100_000):
        value = [value]
    REDACTOR.redact_json(value)
    for _ in range(100_000):
        value = value[0]
    assert value == {"password": REDACTED}
    too_deep = "[" * 100_000 + "]" * 100_000
    assert REDACTOR.redact_json(too_deep) == too_deep
    embedded = "x"
    for _ in range(20):  # deeper than the embedded-JSON limit; each level doubles the escapes
        embedded = json.dumps([embedded])
    assert REDACTOR.redact_json(embedded) == embedded


def test_a_cycle_is_visited_once() -> None:
    cyclic: list[Any] = [f"Bearer {JWT}"]
    cyclic.append(cyclic)
    assert REDACTOR.redact_json(cyclic)[0] == f"Bearer {REDACTED}"


ORDINARY: list[Any] = [
    "a3f9c2e4b1d08f7e6a5c4b3d2e1f0a9b8c7d6e5f",
    "3f2b8c1e-9d4a-4e7b-8c2f-1a6d5e4b3c2a",
    "/home/dev/project/src/session_journal/journal/redaction.py",
    {"max_tokens": 4096, "model": "claude-sonnet-4", "temperature": 0.2},
    {"usage": {"input_tokens": 1234, "output_tokens": 567, "token_count": 1801, "tokens": 9}},
    {"tokens_used": 1801, "cache_read_input_tokens": 0, "token_type": "bpe"},
    "https://api.github.com/repos/octocat/hello-world/pulls?state=open&per_page=50",
    "http://localhost:8080/health",
    "ssh://git@github.com/octocat/hello-world.git and git@github.com:octocat/x.git",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfD"
    "wAChwGA60e6kgAAAABJRU5ErkJggg==",
    "Click the password reset link we emailed you; passwords need 12+ characters.",
    "sk-short123 and sk-abc are not keys",
    "Contact alice@example.com or bob.smith+journal@mail.example.org",
    "Send a Bearer token in the header; Bearer authentication is described in RFC 6750.",
    "The tokenizer splits text into tokens; the secretary keeps the secret minutes.",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
    "eyJhbGciOiJIUzI1NiJ9 is only a header",
    "AKIA1234 is too short",
    "def login(password: str) -> bool:\n    return check_password(password)\n",
    "pytest -q tests/unit/test_redaction.py --maxfail=1",
    {"seq": 7, "ts": "2024-05-01T12:00:00Z", "type": "turn_end", "stop_reason": "end_turn"},
    {"secretary": "Ms. Jones", "author": "dev", "key": "value", "cookbook": ["a", "b"]},
    '{"model": "claude-3", "max_tokens": 1024, "messages": [{"role": "user"}]}',
]


@pytest.mark.parametrize("value", ORDINARY)
def test_ordinary_values_come_out_unchanged(value: Any) -> None:
    assert REDACTOR.redact_json(copy.deepcopy(value)) == value


# No word of a secret name (each holds an a, e or o) and no secret shape ("-", "_", ":", "A" and
# "e" are all missing) can be spelled from this alphabet.
SAFE_ALPHABET = "bcdfghijklmnpqrstuvwxyzBCDFGHIJKLMNPQRSTUVWXYZ0123456789 .,!?\n"
safe_text = st.text(alphabet=SAFE_ALPHABET, max_size=20)
numbers = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)


def json_values(text: st.SearchStrategy[str], keys: st.SearchStrategy[str]) -> Any:
    """JSON-like values whose strings come from `text`, including JSON encoded in strings."""
    leaves = numbers | text
    values = st.recursive(
        leaves,
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4)
        ),
        max_leaves=15,
    )
    return st.recursive(values, lambda inner: inner | inner.map(json.dumps), max_leaves=3)


secrets = st.sampled_from(SECRETS)
secret_text = secrets | st.tuples(safe_text, secrets, safe_text).map("".join)
mixed_keys = safe_text | st.sampled_from(
    ["password", "apiKey", "X-Api-Key", "max_tokens", "token_count", "seq", "type", "name"]
)


@settings(deadline=None)
@given(json_values(safe_text, safe_text))
def test_values_without_secret_looking_content_are_unchanged(value: Any) -> None:
    assert REDACTOR.redact_json(copy.deepcopy(value)) == value


@settings(deadline=None, max_examples=300)
@given(json_values(safe_text | secret_text, mixed_keys))
def test_redaction_is_idempotent(value: Any) -> None:
    once = REDACTOR.redact_json(value)
    assert REDACTOR.redact_json(copy.deepcopy(once)) == once


def test_json_text_without_secrets_is_given_back_as_it_is() -> None:
    text = '{"seq":3,"event":{"type":"x","data":{"n":1.0e5,"message":"caf\\u00e9 token count: 5"}}}'
    assert REDACTOR.may_hold_secrets(text)  # "token": the full test runs, and changes nothing
    assert REDACTOR.redact_json_text(text) is text
    plain = '{"seq":3,"event":{"type":"x","data":{"message":"hello"}}}'
    assert not REDACTOR.may_hold_secrets(plain)
    assert REDACTOR.redact_json_text(plain) is plain


def test_json_text_with_secrets_is_redacted_and_encoded_compactly() -> None:
    text = json.dumps(
        {"seq": 3, "event": {"data": {"message": "naïve password=hunter2", "password": 1}}},
        ensure_ascii=False,
        indent=1,
    )
    assert REDACTOR.redact_json_text(text) == (
        '{"seq":3,"event":{"data":{"message":"naïve password=[REDACTED]","password":"[REDACTED]"}}}'
    )
    assert REDACTOR.redact_json_text(json.dumps(f"key {OPENAI_KEY}")) == f'"key {REDACTED}"'
    assert REDACTOR.redact_json_text("[1, 2]") == "[1, 2]"


def test_json_text_that_is_not_json_is_refused() -> None:
    with pytest.raises(InvalidRecord, match="not JSON text"):
        REDACTOR.redact_json_text('{"password": ')
    with pytest.raises(InvalidRecord, match="not JSON text"):
        Redactor(extra_patterns=["x+"]).redact_json_text("plain text")


def test_the_quick_test_sees_escaped_letters_and_extra_patterns() -> None:
    # "\u0070assword" is "password"; "\u212aey" lower-cases to "key" (as `_words` does).
    for text in ['{"\\u0070assword":"x"}', '{"api_\\u212aey":"x"}']:
        assert REDACTOR.may_hold_secrets(text)
        assert json.loads(REDACTOR.redact_json_text(text)) != json.loads(text)
    assert Redactor(extra_patterns=["ACME-[0-9]+"]).may_hold_secrets("{}")


@settings(deadline=None, max_examples=300)
@given(json_values(safe_text | secret_text, mixed_keys))
def test_the_quick_test_never_misses_what_redaction_changes(value: Any) -> None:
    for ensure_ascii in (True, False):
        text = json.dumps(value, ensure_ascii=ensure_ascii)
        if REDACTOR.redact_json(copy.deepcopy(value)) != value:
            assert REDACTOR.may_hold_secrets(text)
        assert json.loads(REDACTOR.redact_json_text(text)) == REDACTOR.redact_json(
            copy.deepcopy(value)
        )


HOSTILE = {
    # Text built to make a rule read it again from each of its characters, and how it begins
    # once redacted: each takes time in proportion to its length now (about a second a MiB),
    # minutes when it grew as the square.
    "settings that are no secrets": ("see key " + "a=" * 500_000, "see key a=a=a=a=a=a="),
    "settings with dashes": ("key " + "--a=" * 250_000, "key --a=--a=--a=--a="),
    "a scheme that never comes": ("key " + "a." * 500_000, "key a.a.a.a.a.a.a.a."),
    "a JWT that goes on": ("eyJ" + "a." * 500_000, "[REDACTED].a.a.a.a.a"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_text_is_redacted_in_time_proportional_to_its_length(case: str) -> None:
    # In a child process, so that a rule whose time grows as the square fails the test (killed
    # after a minute) instead of holding the suite for the quarter of an hour it would take.
    text, begins = HOSTILE[case]
    code = (
        "import sys\n"
        "from session_journal import Redactor\n"
        "print(Redactor().redact_text(sys.stdin.read())[:20])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=text, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, begins + "\n"), done.stderr
