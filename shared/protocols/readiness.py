"""Whether the app can serve purchases now, as `GET /api/health` reports it: every secret set,
resolved, usable and (on Azure) neither public nor weak, and Table, Blob and the contact queue
answering with the app's credentials.The storage probe itself is a seam (`shared.seams.storage_probe`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from shared.config.errors import NotConfigured
from shared.config.keys import KeySet
from shared.config.settings import Settings
from shared.seams.storage_probe import StorageProbe


@dataclass(frozen=True)
class Readiness:
    missing_settings: tuple[str, ...]
    problems: tuple[str, ...]
    configured: bool

    @property
    def status(self) -> str:
        if not self.configured:
            return "unconfigured"
        return "unavailable" if self.problems else "ok"


def setting_problems(settings: Settings, keys: Callable[[], KeySet]) -> list[tuple[str, str]]:
    """(setting, what is wrong with it) for every setting that stops purchases; never a value."""
    found = [(name, f"{name} is an unresolved Key Vault reference") for name in settings.unresolved_settings]
    found += [(name, f"{name} is not set") for name in settings.missing_secrets if name not in dict(found)]
    found += [(name, problem) for name, problem in settings.weak_secrets if name in settings.refused_secrets]
    if "STOREFRONT_SIGNING_KEY" not in dict(found):
        try:
            keys()
        except NotConfigured:
            found.append(
                ("STOREFRONT_SIGNING_KEY", "STOREFRONT_SIGNING_KEY is not a usable EC P-256 private key")
            )
    return found


def assess(settings: Settings, keys: Callable[[], KeySet], storage: StorageProbe) -> Readiness:
    configuration = setting_problems(settings, keys)
    return Readiness(
        missing_settings=tuple(name for name, _ in configuration),
        problems=tuple(problem for _, problem in configuration) + tuple(storage.problems()),
        configured=not configuration,
    )
