"""`datasette capsem push-otlp --endpoint URL`: every session's traces, streamed to a trace store.

Standard OTLP over HTTP (protobuf, or OTLP/JSON with --json) to an OpenTelemetry Collector,
Jaeger, Tempo, Phoenix, Langfuse...; only what the endpoint has not acknowledged yet (the
record is in the plugin's cache, see push/state.py). --follow keeps polling for new sessions
and new rows of live ones until Ctrl-C. Without --follow, an endpoint no connection can be
made to fails fast: `PROBE_TRIES` attempts, `PROBE_PAUSE` s apart, before any ledger is read
(the batch retries and their doubling backoff are for a receiver that answers, or stops
answering mid-push). Exit status: 0 when everything was delivered, 1 when spans could not be
delivered or ledgers could not be read, 2 for a bad option.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import click
import httpx

from datasette_capsem.cli.common import (
    HomeChoice,
    cache_option,
    home_option,
    number_option,
    settings_from_options,
)
from datasette_capsem.push.encode import JSON, PROTOBUF
from datasette_capsem.push.pusher import Pusher, StopPush, Summary
from datasette_capsem.push.state import DeliveryState, state_path
from datasette_capsem.push.transport import EndpointError, Sender, parse_headers, traces_url

EXIT_FAILED = 1
PROBE_TRIES, PROBE_PAUSE, PROBE_CONNECT_SECONDS = 3, 0.5, 5.0


def _say(message: str) -> None:
    click.echo(f"push-otlp: {message}", err=True)


def _summary_lines(summary: Summary, url: str) -> list[str]:
    s = summary
    lines = [
        f"endpoint: {url}",
        f"sessions: {s.sessions_read} read, {s.sessions_unchanged} unchanged since the last "
        f"delivery, {s.sessions_without_ledger} without a ledger on disk, "
        f"{len(s.unreadable)} unreadable",
        f"traces: {s.traces_sent} sent, {s.traces_skipped} already delivered, "
        f"{s.traces_shared} shared with another session, {s.traces_failed} failed",
        f"spans: {s.spans_sent} sent in {s.requests} requests ({s.retries} retries), "
        f"{s.spans_skipped} already delivered, {s.spans_shared} shared with another session "
        f"(sent once), {s.spans_failed} failed, {s.spans_rejected} rejected by the receiver",
    ]
    lines += [f"unreadable: {sid}: {problem}" for sid, problem in sorted(s.unreadable.items())]
    if s.stopped:
        lines.append(f"stopped: {s.stopped}")
    return lines


def _unreachable(url: str, headers: dict[str, str], retries: int, timeout: float) -> str | None:
    """Why no connection can be made to the endpoint (after at most PROBE_TRIES attempts,
    fewer with a smaller --retries), or None once one is made, whatever it answers. The
    probe is an OPTIONS request: no span is sent."""
    tries = min(retries + 1, PROBE_TRIES)
    limits = httpx.Timeout(timeout, connect=min(timeout, PROBE_CONNECT_SECONDS))
    with httpx.Client(headers=headers, timeout=limits, follow_redirects=False) as client:
        for attempt in range(1, tries + 1):
            try:
                client.options(url)
                return None
            except (httpx.ConnectError, httpx.ConnectTimeout) as error:
                problem = f"{type(error).__name__}: {error or 'no detail'}"
            except httpx.HTTPError:
                return None  # connected: the batches' own retries take it from here
            if attempt == tries:
                return f"{url}: {tries} attempts failed; last: {problem}"
            _say(f"{problem}; retrying in {PROBE_PAUSE:.2f} s")
            time.sleep(PROBE_PAUSE)
    return None


def _wait(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))


def _sigterm_as_interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


@click.command(name="push-otlp")
@click.option("--endpoint", required=True, help="OTLP/HTTP URL (a bare host:port gets /v1/traces).")
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="NAME=VALUE",
    help="HTTP header sent with every request (repeatable), e.g. authorization=Bearer ...",
)
@home_option
@click.option(
    "--home-label",
    help="Value of the `capsem.home` resource attribute (default: the home's folder name).",
)
@cache_option
@click.option("--follow", is_flag=True, help="Keep polling for new sessions and rows until Ctrl-C.")
@number_option("--interval", click.FloatRange(min=0.1), 5.0, "Seconds between polls with --follow.")
@click.option("--json", "as_json", is_flag=True, help="Send OTLP/JSON instead of protobuf.")
@number_option("--batch-spans", click.IntRange(min=1), 500, "At most this many spans per request.")
@number_option(
    "--retries",
    click.IntRange(min=0),
    5,
    "Retries of a failed request (5xx, 429, connection errors) before giving up.",
)
@number_option(
    "--backoff",
    click.FloatRange(min=0),
    1.0,
    "Seconds before the first retry; doubled at each retry (Retry-After wins).",
)
@number_option("--timeout", click.FloatRange(min=0.1), 30.0, "Seconds to wait for one request.")
@click.option(
    "--unmasked",
    is_flag=True,
    help="Send credentials as they are in the ledgers (default: masked as on every page).",
)
@click.option("--summary-json", is_flag=True, help="Print the final summary as JSON on stdout.")
def push_otlp(
    endpoint: str,
    headers: tuple[str, ...],
    home: HomeChoice,
    home_label: str | None,
    cache_dir: Path | None,
    follow: bool,
    interval: float,
    as_json: bool,
    batch_spans: int,
    retries: int,
    backoff: float,
    timeout: float,
    unmasked: bool,
    summary_json: bool,
) -> None:
    """Send every session's traces to an OTLP/HTTP endpoint, only what it has not received yet."""
    try:
        url = traces_url(endpoint)
    except EndpointError as error:
        raise click.BadParameter(str(error), param_hint="--endpoint") from error
    try:
        extra_headers = parse_headers(headers)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--header") from error
    settings = settings_from_options(home, cache_dir)
    label = home_label or settings.capsem_home.name or str(settings.capsem_home)
    content_type = JSON if as_json else PROTOBUF
    problem = None if follow else _unreachable(url, extra_headers, retries, timeout)
    if problem is not None:
        _say(f"cannot reach {problem}; nothing was sent, no ledger was read")
        summary = Summary(stopped=f"the endpoint is unreachable: {problem}")
        if summary_json:
            click.echo(json.dumps({"endpoint": url, **summary.as_dict()}))
        else:
            click.echo(f"endpoint: {url}")
            click.echo(f"stopped: {summary.stopped}")
        raise SystemExit(EXIT_FAILED)
    summary = run(
        settings,
        url,
        extra_headers,
        content_type=content_type,
        label=label,
        masked=not unmasked,
        follow=follow,
        interval=interval,
        batch_spans=batch_spans,
        retries=retries,
        backoff=backoff,
        timeout=timeout,
    )
    if summary_json:
        click.echo(json.dumps({"endpoint": url, **summary.as_dict()}))
    else:
        for line in _summary_lines(summary, url):
            click.echo(line)
    if summary.failed or summary.stopped:
        raise SystemExit(EXIT_FAILED)


def run(
    settings,
    url: str,
    headers: dict[str, str],
    *,
    content_type: str,
    label: str,
    masked: bool,
    follow: bool,
    interval: float,
    batch_spans: int,
    retries: int,
    backoff: float,
    timeout: float,
) -> Summary:
    state = DeliveryState(state_path(settings.cache_dir, url))
    sender = Sender(
        url,
        headers,
        content_type,
        retries=retries,
        backoff=backoff,
        timeout=timeout,
        on_retry=lambda problem, pause: _say(f"{problem}; retrying in {pause:.2f} s"),
    )
    pusher = Pusher(
        settings,
        state,
        sender,
        content_type=content_type,
        home_label=label,
        masked=masked,
        batch_spans=batch_spans,
        progress=_say,
    )
    previous = signal.getsignal(signal.SIGTERM)
    if follow:
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        while True:
            try:
                pusher.run_pass()
                pusher.summary.stopped = None
            except StopPush as error:
                _say(f"cannot deliver: {error}")
                pusher.summary.stopped = (
                    f"the endpoint refused a batch: {error}"
                    if error.refused
                    else f"the endpoint is unreachable: {error}"
                )
                if not follow or error.refused:  # a refusal is the operator's to fix
                    break
            if not follow:
                break
            _wait(interval)
    except KeyboardInterrupt:
        _say("interrupted; what was acknowledged is recorded")
    finally:
        if follow:
            signal.signal(signal.SIGTERM, previous)
        sender.close()
        state.close()
    return pusher.summary
