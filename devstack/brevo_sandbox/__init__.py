"""Brevo sandbox: a local, in-memory stand-in for Brevo's HTTP API v3.

Run ``python -m devstack.brevo_sandbox [--host H] [--port P] [--api-key K]`` and
point the Brevo client at ``http://H:P/v3``. Standard library only.

What it promises:

* ``POST /v3/contacts`` and ``POST /v3/smtp/email`` answer with the status
  codes and JSON bodies real Brevo uses for create, upsert, duplicate,
  validation, authentication and ``headers.idempotencyKey`` de-duplication
  (remembered for 30 minutes, as Brevo does).
* ``GET /v3/smtp/emails`` is Brevo's transactional log: the accepted emails
  to one address (or with one message id), newest first, with their tags.
* Nothing leaves the machine. Accepted emails and contacts live in memory
  only and are shown on ``GET /`` (the way Mailpit shows SMTP mail).
* ``/_sandbox/*`` is a control API for tests: read captured emails, contacts
  and counters, inject failures and delays, reset everything.
* One lock guards all state, so concurrent requests are safe. Responses are
  HTTP/1.1 with an exact Content-Length (204s have no body and, per RFC 9110,
  no Content-Length), so keep-alive clients work.
* One log line per request (method, path, status) goes to stderr; request
  bodies, query strings and headers are never logged.

The modules: ``wire`` (errors, request and response records, field checks), ``contacts``,
``emails`` (transactional email and its links), ``email_log`` (``GET /v3/smtp/emails``),
``faults`` (fault injection), ``state`` (the locked memory), ``pages`` (the HTML inbox),
``app`` (routing), ``server`` (HTTP) and ``__main__`` (the command line).
"""

from __future__ import annotations

from devstack.brevo_sandbox.app import SandboxApp
from devstack.brevo_sandbox.server import make_server

__all__ = ["SandboxApp", "make_server"]
