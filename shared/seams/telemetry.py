"""The telemetry seam: OpenTelemetry to Application Insights through the Azure Monitor distro,
switched on by `APPLICATIONINSIGHTS_CONNECTION_STRING` and by nothing else.

Unset, this module imports only the standard library and every call is a no-op, so the cold start
does not grow. Set, `configure()` runs once per process: a span per purchase, the root logger's
records and four counters go out, each through `scrub()` first (a span processor and a log record
processor placed before the distro's own), so no query value, email address, download token, HTTP
header or client address leaves the process. docs/telemetry.md lists what is sent and what never is.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol

from shared.config.settings_reader import is_unresolved_reference


class Answer(Protocol):
    """What telemetry reads of a route's answer (the protocol adapters' `http.Answer`)."""

    @property
    def status(self) -> int: ...
    @property
    def body(self) -> bytes: ...
    @property
    def headers(self) -> Mapping[str, str]: ...


log = logging.getLogger("storefront.telemetry")
CONNECTION_SETTING = "APPLICATIONINSIGHTS_CONNECTION_STRING"
BREVO_URL_SETTING = "BREVO_BASE_URL"
DEFAULT_BREVO_URL = "https://api.brevo.com/v3"

PURCHASE_SPAN = "storefront.purchase"  # a purchase route's span once the answer is a receipt
REQUEST_SPAN = "storefront.request"  # a purchase route's span for any other answer (MCP initialize, 405)
PURCHASES = "storefront.purchases"  # {status, channel}: fresh receipts (replays are not counted again)
REFUSALS = "storefront.refusals"  # {error_code, channel}: fresh receipts with status refused
DEGRADED_CHECKS = "storefront.degraded_checks"  # {check, channel}: checks that ran degraded
REPLAYS = "storefront.replays"  # {status, channel}: receipts served again for a repeated key
DEPENDENCY = "storefront.dependency"  # "brevo", "table", "blob" or "queue" on each outgoing call's span

# Dropped whatever they hold: captured HTTP headers carry the Brevo api-key and storage
# authorisation, a client address identifies the buyer.
_DROPPED_PREFIXES = ("http.request.header.", "http.response.header.")
_DROPPED = frozenset({"client.address", "http.client_ip"})
_URL_KEYS = ("url.full", "http.url")
# The Azure SDK names its spans after its clients' methods and the generated operations they call.
_TABLE_CLIENTS = ("TableClient.", "TableServiceClient.", "TableOperations.")
_BLOB_CLIENTS = (
    "ContainerClient.",
    "BlobClient.",
    "BlobServiceClient.",
    "ContainerOperations.",
    "BlobOperations.",
)
_QUEUE_CLIENTS = ("QueueClient.", "QueueServiceClient.", "QueueOperations.", "MessagesOperations.")


def scrub(text: str) -> str:
    """`text` with query values, download tokens and email addresses replaced."""
    for pattern, replacement in _scrubs():
        text = pattern.sub(replacement, text)
    return text


@functools.cache
def _scrubs() -> tuple[tuple[re.Pattern[str], str], ...]:
    """Compiled on first use: compiling them at import would cost the cold start milliseconds."""
    return (
        # A value in a query string: the Brevo log lookup carries the buyer's email there.
        (re.compile(r"([?&][^=&#\s'\"]+=)[^&#\s'\"]*"), r"\1<redacted>"),
        # A download link's path segment is the token itself.
        (re.compile(r"(/download/)[^/?#\s'\"]+", re.IGNORECASE), r"\1<token>"),
        # A JWT anywhere (download tokens are ES256 JWTs).
        (re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]*"), "<token>"),
        # An email address, raw or percent-encoded.
        (re.compile(r"[\w.!#$%&'*+/=?^`{|}~-]+(?:@|%40)[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"), "<email>"),
    )


def scrub_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes that may leave the process, their text scrubbed."""
    kept: dict[str, Any] = {}
    for key, value in attributes.items():
        if key in _DROPPED or key.startswith(_DROPPED_PREFIXES):
            continue
        if isinstance(value, str):
            value = scrub(value)
        elif isinstance(value, (tuple, list)):
            value = tuple(scrub(v) if isinstance(v, str) else v for v in value)
        kept[key] = value
    return kept


class _Telemetry:
    """The tracer and the four counters (a plain class: a dataclass costs the cold start 0.7 ms)."""

    def __init__(self, tracer: Any, meter: Any):
        self.tracer = tracer
        self.purchases = meter.create_counter(
            PURCHASES, "{purchase}", "purchases answered with a new receipt"
        )
        self.refusals = meter.create_counter(REFUSALS, "{purchase}", "purchases refused, by error code")
        self.degraded = meter.create_counter(DEGRADED_CHECKS, "{check}", "receipt checks that ran degraded")
        self.replays = meter.create_counter(REPLAYS, "{purchase}", "receipts served again for a repeated key")


_lock = threading.Lock()
_telemetry: _Telemetry | None = None


def configure(env: Mapping[str, str] | None = None) -> bool:
    """Send telemetry to Application Insights when `APPLICATIONINSIGHTS_CONNECTION_STRING` is set;
    once per process. False, with nothing imported or configured, when it is unset; False, and
    logged by name, when it is unusable (malformed, or a Key Vault reference left unresolved)."""
    global _telemetry
    env = os.environ if env is None else env
    connection_string = env.get(CONNECTION_SETTING, "").strip()
    if not connection_string:
        return False
    if is_unresolved_reference(connection_string):
        log.error("%s is an unresolved Key Vault reference; running without telemetry", CONNECTION_SETTING)
        return False
    with _lock:
        if _telemetry is None:
            try:
                _telemetry = _configure(connection_string, env.get(BREVO_URL_SETTING) or DEFAULT_BREVO_URL)
            except Exception as exc:  # telemetry never takes the store down with it
                log.error(
                    "%s is not usable (%s); running without telemetry", CONNECTION_SETTING, type(exc).__name__
                )
                return False
    return True


def _configure(connection_string: str, brevo_url: str) -> _Telemetry:
    # The Azure Functions detector, as the Python worker sets it; the distro's default also probes
    # the VM metadata endpoint, a network call at start-up that a function app never needs.
    os.environ.setdefault("OTEL_EXPERIMENTAL_RESOURCE_DETECTORS", "azure_functions")
    from azure.monitor.opentelemetry import configure_azure_monitor
    from opentelemetry import metrics, trace

    # Every purchase is traced unless the operator picks a sampler (OTEL_TRACES_SAMPLER); the
    # distro's own default keeps 5 traces a second.
    sampling = {} if os.environ.get("OTEL_TRACES_SAMPLER") else {"sampling_ratio": 1.0}
    configure_azure_monitor(
        connection_string=connection_string,
        **sampling,
        span_processors=[_scrubbing_span_processor(brevo_url)],
        log_record_processors=[_scrubbing_log_processor()],
        # requests already spans every Brevo call and the Azure SDK every Storage call; urllib3
        # underneath them would only repeat each as a second, unparented dependency.
        instrumentation_options={"urllib3": {"enabled": False}, "urllib": {"enabled": False}},
    )
    return _Telemetry(trace.get_tracer("storefront"), metrics.get_meter("storefront"))


def _scrubbing_span_processor(brevo_url: str) -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import Event, SpanProcessor

    brevo_prefix = brevo_url.rstrip("/") + "/"

    class ScrubbingSpanProcessor(SpanProcessor):
        """Names the outgoing call each span stands for as it starts, and scrubs each span as it
        ends, before the distro's exporter and live metrics read it. An ended span is read-only
        through the SDK's API, and the message of an exception recorded on it (a refused
        connection quotes the whole URL) exists only at its end, so `on_end` replaces the ended
        span's name, attributes and events; the same object then goes on to the distro's
        processors, which this one precedes."""

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            parent = trace.get_current_span(parent_context)
            kind = _dependency(span.name, getattr(parent, "name", ""), span.attributes or {}, brevo_prefix)
            if kind:
                span.set_attribute(DEPENDENCY, kind)

        def on_end(self, span: Any) -> None:
            span._name = scrub(span.name)
            span._attributes = scrub_attributes(span.attributes)
            span._events = tuple(
                Event(event.name, scrub_attributes(event.attributes or {}), event.timestamp)
                for event in span.events
            )

    return ScrubbingSpanProcessor()


def _dependency(name: str, parent_name: str, attributes: Mapping[str, Any], brevo_prefix: str) -> str | None:
    """Which service a span calls: brevo for a request under the Brevo base URL; table, blob or
    queue for an Azure SDK span (`TableClient.get_entity`, `ContainerClient.upload_blob`,
    `QueueClient.send_message`) and the HTTP call made under it."""
    url = next((str(attributes[key]) for key in _URL_KEYS if key in attributes), "")
    if url.startswith(brevo_prefix):
        return "brevo"
    for client in (name, parent_name):
        if client.startswith(_TABLE_CLIENTS):
            return "table"
        if client.startswith(_BLOB_CLIENTS):
            return "blob"
        if client.startswith(_QUEUE_CLIENTS):
            return "queue"
    return None


def _scrubbing_log_processor() -> Any:
    from opentelemetry.sdk._logs import LogRecordProcessor

    class ScrubbingLogProcessor(LogRecordProcessor):
        """Scrubs each log record's message and attributes (exception text included) before the
        distro's exporter reads it."""

        def on_emit(self, log_record: Any) -> None:
            record = log_record.log_record
            if isinstance(record.body, str):
                record.body = scrub(record.body)
            if record.attributes:
                record.attributes = scrub_attributes(record.attributes)

        def shutdown(self) -> None:
            pass

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return True

    return ScrubbingLogProcessor()


class _Observation:
    """What a purchase route's answer says, put on its span and counters."""

    def __init__(self, telemetry: _Telemetry, span: Any, channel: str):
        self._telemetry, self._span, self._channel = telemetry, span, channel

    def answered(self, answer: Answer) -> None:
        span = self._span
        span.set_attribute("http.response.status_code", answer.status)
        found = receipt_of(self._channel, answer)
        if found is None:
            if answer.status >= 500:
                _failed(span)
            return
        receipt, replayed = found
        status = str(receipt.get("status"))
        checks = {str(c.get("name")): str(c.get("result")) for c in receipt.get("checks", [])}
        given = receipt.get("error")
        error: dict = given if isinstance(given, dict) else {}
        span.update_name(PURCHASE_SPAN)
        span.set_attributes(
            {
                "storefront.receipt_id": str(receipt.get("receipt_id")),
                "storefront.status": status,
                "storefront.replayed": replayed,
                **{f"storefront.check.{name}": result for name, result in checks.items()},
                **({"storefront.error_code": str(error["code"])} if error.get("code") else {}),
            }
        )
        if status == "failed" or answer.status >= 500:
            _failed(span)
        self._count(status, checks, str(error.get("code") or "unknown"), replayed)

    def _count(self, status: str, checks: dict[str, str], error_code: str, replayed: bool) -> None:
        t, channel = self._telemetry, self._channel
        if replayed:
            t.replays.add(1, {"status": status, "channel": channel})
            return
        t.purchases.add(1, {"status": status, "channel": channel})
        if status == "refused":
            t.refusals.add(1, {"error_code": error_code, "channel": channel})
        for name, result in checks.items():
            if result == "degraded":
                t.degraded.add(1, {"check": name, "channel": channel})


class _Unobserved:
    def answered(self, answer: Answer) -> None:
        pass


_UNOBSERVED = _Unobserved()


def _failed(span: Any) -> None:
    from opentelemetry.trace import StatusCode

    span.set_status(StatusCode.ERROR)


@contextmanager
def purchase_span(channel: str | None, method: str) -> Iterator[_Observation | _Unobserved]:
    """A server span, current for the whole call, for a purchase route (`channel` "mcp" or "http");
    call `.answered(answer)` on what it yields. Nothing is recorded without telemetry or channel.
    An exception is recorded by its type only: its message may quote anything."""
    telemetry = _telemetry
    if telemetry is None or channel is None:
        yield _UNOBSERVED
        return
    from opentelemetry.trace import SpanKind

    with telemetry.tracer.start_as_current_span(
        REQUEST_SPAN,
        kind=SpanKind.SERVER,
        attributes={"storefront.channel": channel, "http.request.method": method.upper()},
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield _Observation(telemetry, span, channel)
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__qualname__)
            _failed(span)
            raise


def _a2a_receipt(document: object) -> object:
    result = document.get("result") if isinstance(document, dict) else None
    task: Any = result.get("task", result) if isinstance(result, dict) else None
    try:  # any shape but a finished task's ends in one of these
        return task["artifacts"][0]["parts"][0]["data"]
    except (KeyError, IndexError, TypeError):
        return None


def receipt_of(channel: str, answer: Answer) -> tuple[dict, bool] | None:
    """The receipt a purchase route answered with and whether it was a replay, or None when the
    answer is no receipt: the HTTP body itself, the MCP tool result's structuredContent, or the
    data part of the A2A task's receipt artifact (1.0 wraps the task in `result.task`)."""
    try:
        document = json.loads(answer.body)
    except ValueError:
        return None
    if channel == "mcp":
        result = document.get("result") if isinstance(document, dict) else None
        if not isinstance(result, dict):
            return None
        receipt = result.get("structuredContent")
        meta = result.get("_meta")
        replayed = isinstance(meta, dict) and meta.get("storefront/replayed") is True
    elif channel == "a2a":
        receipt = _a2a_receipt(document)
        replayed = answer.headers.get("Idempotent-Replayed") == "true"
    else:
        receipt = document
        replayed = answer.headers.get("Idempotent-Replayed") == "true"
    if not (
        isinstance(receipt, dict) and "receipt_id" in receipt and isinstance(receipt.get("checks"), list)
    ):
        return None
    return receipt, replayed
