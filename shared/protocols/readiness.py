"""Whether the app can serve purchases now, as `GET /api/health` reports it: every secret set,
resolved, usable and (on Azure) neither public nor weak, and Table, Blob and the contact queue
answering with the app's credentials. A bundle whose file is not uploaded leaves the store
`degraded`: the other bundles work, that one's links answer 503, and the problem says how to
upload its file, naming no setting's value (health is anonymous). The storage probe
itself is a seam (`shared.seams.storage_probe`).
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
    missing_bundles: tuple[str, ...] = ()
    bundle_problems: tuple[str, ...] = ()

    @property
    def status(self) -> str:
        if not self.configured:
            return "unconfigured"
        if self.problems:
            return "unavailable"
        return "degraded" if self.missing_bundles else "ok"

    @property
    def serving(self) -> bool:
        """Whether purchases go through: `ok`, or `degraded` (some bundles cannot be downloaded)."""
        return self.status in ("ok", "degraded")


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


def upload_command(settings: Settings, bundle_id: str) -> str:
    """How the operator puts a bundle's file in place: with the Azure CLI on Azure
    (docs/deploying.md#uploading-the-bundle-files), with the seeding tool on Azurite."""
    if not settings.hosted_on_azure:
        return f"python -m devstack.seed_bundles --file {bundle_id}=<path to the zip>"
    # Health answers anyone: the account is named the way the operator reads it, not its value.
    return (
        'az storage blob upload --auth-mode login --account-name "$(azd env get-value '
        'AZURE_STORAGE_ACCOUNT_NAME)" --container-name <the bundles container> '
        f"--name {bundle_id}.zip --file <path to the zip> --content-type application/zip"
    )


def bundle_problem(settings: Settings, bundle_id: str) -> str:
    return (
        f"bundle {bundle_id} has no file {bundle_id}.zip in the bundles container, so its download "
        f"links answer 503; upload it: {upload_command(settings, bundle_id)}"
    )


def assess(settings: Settings, keys: Callable[[], KeySet], storage: StorageProbe) -> Readiness:
    configuration = setting_problems(settings, keys)
    problems = tuple(storage.problems())  # probes first: the missing bundles are this probe's
    missing = tuple(storage.missing_bundles())
    return Readiness(
        missing_settings=tuple(name for name, _ in configuration),
        problems=tuple(problem for _, problem in configuration) + problems,
        configured=not configuration,
        missing_bundles=missing,
        bundle_problems=tuple(bundle_problem(settings, bundle_id) for bundle_id in missing),
    )
