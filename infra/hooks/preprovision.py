"""The azd preprovision hook: check the azd environment's inputs, and generate the store's signing
key and hash secret once.

azd hands a hook the environment's values as environment variables, and later substitutes them,
as they are, into infra/main.parameters.json: each value must fit inside a JSON string there.
`azd env set` keeps a generated value in the environment (.azure/<env>/.env, which azd never
packages), so every later provision passes the same one to Key Vault. An environment that was
provisioned before (AZURE_KEY_VAULT_NAME is one of its outputs) and has lost a secret is refused
rather than given a new one: that would rotate the secret without anyone deciding to.

Exits 0 when provisioning may go ahead; otherwise 1, with each problem on stderr.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the app's own checks, from the repo

try:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from shared.config.errors import NotConfigured
    from shared.config.keys import load_private_key
    from shared.config.settings import Settings, SettingsError
except ImportError as exc:
    sys.exit(f"preprovision: {exc}; run it with the project's virtualenv (`make install` creates it)")

SIGNING_KEY = "STOREFRONT_SIGNING_KEY"
HASH_SECRET = "STOREFRONT_HASH_SECRET"
RETIRED_KEYS = "STOREFRONT_RETIRED_PUBLIC_KEYS_BASE64"
CONTACT_LIST = "BREVO_CONTACT_LIST_ID"
PROVISIONED = "AZURE_KEY_VAULT_NAME"  # an output of infra/main.bicep
REQUIRED = {
    "BREVO_API_KEY": "azd env set BREVO_API_KEY <your Brevo API key>",
    "STOREFRONT_SENDER_EMAIL": "azd env set STOREFRONT_SENDER_EMAIL <a sender verified in Brevo>",
}
# The limits infra/main.parameters.json passes, each named as the app setting it becomes.
LIMITS = (
    "STOREFRONT_RATE_LIMIT_PER_HOUR",
    "STOREFRONT_RECIPIENT_LIMIT_PER_DAY",
    "STOREFRONT_DAILY_COST_CEILING_USD",
    "STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR",
    "STOREFRONT_AGENT_SITE_RATE_LIMIT_PER_HOUR",
)
PASSED = (
    *REQUIRED,
    SIGNING_KEY,
    HASH_SECRET,
    RETIRED_KEYS,
    CONTACT_LIST,
    "STOREFRONT_PUBLIC_BASE_URL",
    *LIMITS,
)
# What a raw substitution into a JSON string cannot carry: a quote, a control character (a real
# line break), a backslash that does not start the \n escapes the signing key is written with.
_UNFIT = re.compile(r'["\x00-\x1f]|\\(?!n)')


def new_signing_key() -> str:
    """A new EC P-256 private key in PKCS#8 PEM, on one line: its line breaks are written as \\n,
    which the app reads and the parameters file turns back into line breaks."""
    key = ec.generate_private_key(ec.SECP256R1())
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem.decode().replace("\n", "\\n")


def new_hash_secret() -> str:
    return secrets.token_hex(32)


GENERATED: dict[str, Callable[[], str]] = {SIGNING_KEY: new_signing_key, HASH_SECRET: new_hash_secret}


def prepare(env: Mapping[str, str], keep: Callable[[str, str], None]) -> list[str]:
    """The problems that stop provisioning. With none, each missing secret is generated and kept."""
    present = {name: env.get(name, "").strip() for name in (*PASSED, PROVISIONED)}
    found = [f"{name} is not set: {how}" for name, how in REQUIRED.items() if not present[name]]
    # azd hands Bicep's int parameters a number it parses untrimmed: it would drop such a value and
    # deploy the default, silently.
    found += [
        f"{name} has spaces around it; set it without them"
        for name in LIMITS
        if env.get(name, "") != present[name]
    ]
    found += [
        f"{name} holds a quote, a line break or a backslash, which the parameters file cannot carry"
        for name in PASSED
        if _UNFIT.search(present[name])
    ]
    found += _unreadable(present)
    missing = [name for name in GENERATED if not present[name]]
    if missing and present[PROVISIONED]:
        found += [
            f"{name} is missing from an environment already provisioned; a new one would rotate it. "
            "Restore it from Key Vault (docs/deploying.md) or set a new one deliberately"
            for name in missing
        ]
    if not found:
        for name in missing:
            keep(name, GENERATED[name]())
            print(f"preprovision: generated {name} and kept it in the azd environment")
    return found


def _unreadable(present: Mapping[str, str]) -> list[str]:
    """Values the app would refuse, found now rather than after a deployment."""
    found = []
    if present[SIGNING_KEY]:
        try:
            load_private_key(present[SIGNING_KEY].replace("\\n", "\n"))
        except NotConfigured as exc:
            found.append(str(exc))
    if present[RETIRED_KEYS]:
        try:
            retired = base64.b64decode(present[RETIRED_KEYS], validate=True).decode()
            Settings.from_env({"STOREFRONT_RETIRED_PUBLIC_KEYS": retired})
        except (binascii.Error, UnicodeDecodeError):
            found.append(f"{RETIRED_KEYS} is not base64 of UTF-8 text")
        except SettingsError as exc:
            found.append(f"{RETIRED_KEYS}, decoded: {exc}")
    for name in (CONTACT_LIST, *LIMITS):  # what the app would stop at start-up on, with its words
        if present[name]:
            try:
                Settings.from_env({name: present[name]})
            except SettingsError as exc:
                found.append(str(exc))
    return found


class AzdFailed(Exception):
    """`azd env set` failed; the message names the setting, never its value."""


def azd_env_set(name: str, value: str) -> None:
    # `--` ends the options: a PEM value starts with dashes. Not check=True: its error, and any
    # traceback, would print the command line, the new secret with it.
    done = subprocess.run(["azd", "env", "set", "--", name, value], check=False)
    if done.returncode != 0:
        raise AzdFailed(f"`azd env set {name}` failed (exit {done.returncode})")


def main() -> int:
    try:
        found = prepare(os.environ, azd_env_set)
    except AzdFailed as exc:
        found = [str(exc)]
    for problem in found:
        print(f"preprovision: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
