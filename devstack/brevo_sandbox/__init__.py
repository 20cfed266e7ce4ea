"""Brevo sandbox: a local, in-memory stand-in for Brevo's HTTP API v3 (contacts, contact imports,
transactional email and its log) with Brevo's status codes, error bodies and rate limits, a page of
the captured emails at ``/`` and a control API for tests under ``/_sandbox/``. Standard library
only; nothing leaves the machine. What it promises: docs/development.md#brevo-sandbox.

Run ``python -m devstack.brevo_sandbox [--host H] [--port P] [--api-key K] [--tier T]
[--limit FAMILY=N/s|N/h|off ...]`` and point the Brevo client at ``http://H:P/v3``; in process,
``server.make_server`` takes the same options. Its modules are named for what they hold (``state``
is the locked memory, ``control`` the control API, ``app`` the routing of Brevo's paths).
"""
