"""What the masker recognises as a credential, in raw, JSON-escaped and HTML-escaped text."""

from __future__ import annotations

import pytest

from datasette_capsem.redaction import HIDDEN, mask_text, redact_cell


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
        # Issue 16: shapes the first masker missed, raw and JSON-escaped.
        ("cat .env\nSECRET=s3cr3tvalue\nPASSWORD=hunter22", "s3cr3tvalue"),
        ("cat .env\nSECRET=s3cr3tvalue\nPASSWORD=hunter22", "hunter22"),
        (r"cat .env\nauth_token=tok0123456", "tok0123456"),
        ('{"DB_PASS": "p@ss w0rd!"}', "p@ss"),
        ('{"DB_PASS": "p@ss w0rd!"}', "w0rd"),
        ("charge sk_live_abcdefghijklmnop", "abcdefghijklmnop"),
        ("psql postgres://admin:pw0123@db.internal/x", "pw0123"),
        ("VAULT_TOKEN=hvs.CAESIabcdefghijklmnopqrstuv", "CAESIabc"),
        ("see github_pat_11ABCDEFG0123456789_abcdefghij", "11ABCDEFG"),
        (r"{\"password\": \"inner-secret\"}", "inner-secret"),
        (r"{\\\"password\\\": \\\"deeper-secret\\\"}", "deeper-secret"),
        ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG", "wJalrXUtn"),
        ("hf_abcdefghijklmnopqrstuvwxyz12", "abcdefghijklmnop"),
        ("ya29.a0AfH6SMBabcdefghijklmnop", "a0AfH6SMB"),
        ("https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXX", "XXXXXXXXXXXX"),
        ("GET /o?X-Amz-Signature=abcdef0123&X-Amz-Credential=AKID%2F2026", "abcdef0123"),
        (r"host: x\r\nCookie: sid=abcdef0123456", "abcdef0123456"),
        ("\tDB_PASSWORD=letmein99", "letmein99"),
        ("password: yamlsecret1", "yamlsecret1"),
        ("&#34;DB_PASS&#34;: &#34;htmlsecret&#34;", "htmlsecret"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\\nb3Blbn\\n-----END OPENSSH PRIVATE KEY-----",
            "b3Blbn",
        ),
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
        '{"input_tokens": 12, "max_tokens": 4096, "session_id": "3f2a", "token_count": 7}',
        "substitution_ref: credential:blake3:0123abcd",
        "tokenizer: cl100k, passed: true",
    ],
)
def test_ordinary_telemetry_is_left_alone(text):
    assert mask_text(text) == text


def test_cells_carriers_hidden_free_text_masked_bytes_decoded():

    assert redact_cell("query", "sig=abc") == HIDDEN
    assert redact_cell("request_headers", "") == HIDDEN
    assert redact_cell("query", None) is None
    assert "hunter22" not in redact_cell("arguments", "PASSWORD=hunter22")
    masked = redact_cell("body", b"\x00authorization: Bearer abcdefghijklmnop\x00")
    assert isinstance(masked, bytes) and b"abcdefghijklmnop" not in masked
