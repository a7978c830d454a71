"""What the masker recognises as a credential, in raw, JSON-escaped and HTML-escaped text."""

from __future__ import annotations

import pytest

from datasette_capsem.redaction import mask_text


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("authorization: Bearer sk-ant-api03-abcdefghijklmnopqrstuv\r\nhost: x", "sk-ant-api03"),
        ('{"x-api-key": "AIzaSyA1234567890abcdefghijklmnopqrstu"}', "AIzaSyA123"),
        ("export AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("git clone https://x:ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com", "ghp_abc"),
        ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijk", "eyJhbGci"),
        ("password=hunter2hunter", "hunter2hunter"),
        (r"{\"api_key\": \"abcdefghij\"}", "abcdefghij"),
        ("&quot;password&quot;: &quot;PlantedPassw0rd!&quot;", "PlantedPassw0rd"),
        ("&#34;authorization&#34;: &#34;Bearer abcdefghijklmnop&#34;", "abcdefghijklmnop"),
        ("cookie: session=abcdef0123456789", "abcdef0123456789"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow"),
        ("xoxb-1234567890-abcdefghij", "xoxb-1234567890"),
    ],
)
def test_credentials_are_masked(text, secret):
    masked = mask_text(text)
    assert secret not in masked
    assert "[redacted:" in masked


@pytest.mark.parametrize(
    "text",
    [
        '{"input_tokens": 1234, "domain": "api.anthropic.com", "model": "claude-sonnet-4"}',
        "GET /v1/messages HTTP/1.1",
        "tool_name: fixture_lookup, call_id: toolu_01ABCDEF",
        "the password field is empty",
    ],
)
def test_ordinary_telemetry_is_left_alone(text):
    assert mask_text(text) == text
