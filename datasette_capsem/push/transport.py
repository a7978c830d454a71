"""POST one OTLP batch, with retries and exponential backoff (OTLP/HTTP's retry rules).

Retried: connection errors and timeouts, 5xx, 429 and 408 (waiting what Retry-After says when
it says it). Not retried: any other 4xx, which is the operator's to fix (wrong path, missing
credentials, a body the receiver refuses): `Refused`. Retries exhausted: `Unreachable`.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import httpx

from datasette_capsem.push.encode import rejected_spans

RETRYABLE_STATUS = frozenset({408, 429, 502, 503, 504}) | frozenset(range(500, 600))
MAX_BACKOFF_SECONDS = 30.0
MAX_RETRY_AFTER_SECONDS = 120.0
BODY_EXCERPT = 300


class EndpointError(ValueError):
    """A --endpoint value that is not an http(s) URL."""


class Refused(Exception):
    """The receiver answered with a status that retrying will not change."""

    def __init__(self, status: int, detail: str):
        self.status = status
        self.detail = detail
        super().__init__(f"HTTP {status}: {detail}" if detail else f"HTTP {status}")


class Unreachable(Exception):
    """Every attempt failed (connection errors, timeouts, 5xx or 429)."""


def traces_url(endpoint: str) -> str:
    """The URL to POST to. A URL with no path gets OTLP's `/v1/traces`, as
    OTEL_EXPORTER_OTLP_ENDPOINT does; any other path is used as given."""
    text = endpoint.strip()
    try:
        parts = urlsplit(text)
        port = parts.port  # raises on a port that is not a number or out of range
    except ValueError as error:
        raise EndpointError(f"{endpoint!r} is not a URL: {error}") from error
    if parts.scheme not in ("http", "https"):
        raise EndpointError(f"{endpoint!r} is not an http:// or https:// URL")
    if not parts.hostname:
        raise EndpointError(f"{endpoint!r} names no host")
    if any(c.isspace() for c in text):
        raise EndpointError(f"{endpoint!r} contains white space")
    del port
    path = parts.path if parts.path not in ("", "/") else "/v1/traces"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def parse_headers(values: tuple[str, ...] | list[str]) -> dict[str, str]:
    """`K=V` pairs; raises ValueError naming the first one that is not."""
    headers = {}
    for value in values:
        name, sep, content = value.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"--header {value!r} is not NAME=VALUE")
        if any(c.isspace() or c in ':()<>@,;"/[]?={}' for c in name) or not name.isascii():
            raise ValueError(f"--header {value!r}: {name!r} is not a valid header name")
        if "\n" in content or "\r" in content:
            raise ValueError(f"--header {value!r}: a value cannot span lines")
        headers[name] = content.strip()
    return headers


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


@dataclass
class Attempts:
    """What happened to one batch: tries made and the problems met on the way."""

    tries: int = 0
    problems: list[str] = field(default_factory=list)
    rejected: int = 0
    rejected_message: str = ""


class Sender:
    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        content_type: str,
        *,
        retries: int = 5,
        backoff: float = 1.0,
        timeout: float = 30.0,
        on_retry: Callable[[str, float], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.url = url
        self.retries = retries
        self.backoff = backoff
        self.on_retry = on_retry
        self.sleep = sleep
        self.client = httpx.Client(
            headers={**headers, "content-type": content_type},
            timeout=timeout,
            follow_redirects=False,
        )

    def close(self) -> None:
        self.client.close()

    def post(self, body: bytes) -> Attempts:
        """Deliver one body; returns once the receiver acknowledged it (2xx)."""
        attempts = Attempts()
        delay = self.backoff
        while True:
            attempts.tries += 1
            wait = None
            try:
                response = self.client.post(self.url, content=body)
            except httpx.HTTPError as error:
                problem = f"{type(error).__name__}: {error or 'no detail'}"
            else:
                status = response.status_code
                if 200 <= status < 300:
                    attempts.rejected, attempts.rejected_message = rejected_spans(
                        response.content, response.headers.get("content-type")
                    )
                    return attempts
                detail = response.text[:BODY_EXCERPT].strip()
                if status not in RETRYABLE_STATUS:
                    raise Refused(status, detail)
                problem = f"HTTP {status}" + (f": {detail}" if detail else "")
                if status in (429, 503):
                    wait = _retry_after(response.headers.get("retry-after"))
            attempts.problems.append(problem)
            if attempts.tries > self.retries:
                raise Unreachable(
                    f"{self.url}: {attempts.tries} attempts failed; last: {attempts.problems[-1]}"
                )
            pause = min(wait, MAX_RETRY_AFTER_SECONDS) if wait is not None else delay
            if self.on_retry:
                self.on_retry(problem, pause)
            self.sleep(pause)
            delay = min(delay * 2, MAX_BACKOFF_SECONDS)
