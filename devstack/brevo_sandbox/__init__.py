"""Brevo sandbox: a local, in-memory stand-in for Brevo's HTTP API v3 (see ``app``)."""

from __future__ import annotations

from devstack.brevo_sandbox.app import make_server

__all__ = ["make_server"]
