"""Brevo sandbox: a local, in-memory stand-in for Brevo's HTTP API v3.

Run ``python -m devstack.brevo_sandbox [--host H] [--port P] [--api-key K] [--tier T]
[--limit FAMILY=N/s|N/h|off ...]`` and point the Brevo client at ``http://H:P/v3``. Standard
library only. In-process, ``make_server(host, port, api_key=None, *, tier="general", limits=None)``
takes the same options (``limits`` maps a family to ``"N/s"``, ``"N/h"`` or ``"off"``).

What it promises:

* ``POST /v3/contacts`` and ``POST /v3/smtp/email`` answer with the status
  codes and JSON bodies real Brevo uses for create, upsert, duplicate,
  validation, authentication and ``headers.idempotencyKey`` de-duplication
  (remembered for 30 minutes, as Brevo does).
* ``POST /v3/contacts/import`` imports a ``jsonBody`` into the same contacts (``listIds``
  required unless ``newList``; ``updateExistingContacts`` false leaves an existing contact
  entirely alone; invalid emails are skipped and reported) and answers 202 ``{"processId"}``,
  the import already complete; ``GET /v3/processes/{id}`` shows it. ``fileBody`` and ``fileUrl``
  are refused with a 400 that says so.
* ``GET /v3/smtp/emails`` is Brevo's transactional log: the accepted emails
  to one address (or with one message id), newest first, with their tags.
* Brevo's published rate limits hold per family (``email``: ``POST /v3/smtp/email``;
  ``contacts``: everything under ``/v3/contacts``; ``smtp_other``: the rest of ``/v3/smtp/``;
  ``other``: the rest of ``/v3``) for the chosen tier (general unless told), in fixed windows for
  the whole sandbox. Every ``/v3`` answer carries ``x-sib-ratelimit-limit``, ``-remaining`` and
  ``-reset``; past a limit the answer is 429 ``too_many_requests`` with those headers, no
  ``Retry-After``, and no change to anything. The control API and ``GET /`` are never limited.
* The account can run out of email credits (402 ``not_enough_credits``) or lack transactional
  activation (403 ``permission_denied``), as ``/_sandbox/account`` sets it.
* Nothing leaves the machine. Accepted emails and contacts live in memory
  only and are shown on ``GET /`` (the way Mailpit shows SMTP mail), with the rate-limit counters.
* ``/_sandbox/*`` is a control API for tests: read captured emails, contacts (with how often
  each was changed after its creation), import reports and counters; read and set the rate
  limits and the account; inject failures, delays and 429 storms; reset everything to how the
  sandbox started.
* One lock guards all state (the rate limiter has its own), so concurrent requests are safe.
  Responses are HTTP/1.1 with an exact Content-Length (204s have no body and, per RFC 9110,
  no Content-Length), so keep-alive clients work.
* One log line per request (method, path, status) goes to stderr; request
  bodies, query strings and headers are never logged.

The modules: ``wire`` (errors, request and response records, field checks), ``contacts``,
``imports`` (contact import and its process), ``emails`` (transactional email and its links),
``email_log`` (``GET /v3/smtp/emails``), ``account`` (credits and activation), ``limits`` (rate
limits, tiers and their counters), ``faults`` (fault injection and storms), ``state`` (the locked
memory), ``pages`` (the HTML inbox), ``control`` (the control API and the pages' routes), ``app``
(routing, and Brevo's paths), ``server`` (HTTP) and ``__main__`` (the command line).
"""
