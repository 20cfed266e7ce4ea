"""The app's local configuration as ``func start`` reads it: ``Values`` from
``local.settings.json`` (else its ``.example``) exported without overriding the environment, and
``host.json``'s route prefix."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DEFAULT_ROUTE_PREFIX = "api"
SETTINGS_FILES = ("local.settings.json", "local.settings.json.example")

log = logging.getLogger("devhost")


def read_settings(app_dir: Path) -> dict[str, str]:
    """Return ``Values`` from the first local settings file present, or ``{}``."""
    for name in SETTINGS_FILES:
        path = app_dir / name
        if path.is_file():
            values = json.loads(path.read_text(encoding="utf-8-sig")).get("Values") or {}
            return {key: _setting_text(value) for key, value in values.items() if value is not None}
    return {}


def _setting_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def apply_settings(values: Mapping[str, str]) -> None:
    """Export settings to ``os.environ``, never overriding a variable already set."""
    for name, value in values.items():
        if name in os.environ:
            log.info(
                "Skipping '%s' from local settings as it's already defined in the environment.",
                name,
            )
        else:
            os.environ[name] = value


def read_route_prefix(app_dir: Path) -> str:
    """Return ``extensions.http.routePrefix`` from ``host.json`` without slashes."""
    path = app_dir / "host.json"
    config = json.loads(path.read_text(encoding="utf-8-sig")) if path.is_file() else {}
    prefix = config.get("extensions", {}).get("http", {}).get("routePrefix")
    return (DEFAULT_ROUTE_PREFIX if prefix is None else prefix).strip("/")
