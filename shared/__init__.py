"""The storefront's domain: the purchase flow and its seams to storage, Brevo and MCP clients.

Nothing here imports `azure.functions`; `function_app.py` is the only glue to the host. The
package is five layers, each importing only from the layers below it:

    protocols/      MCP, A2A and plain HTTP: requests in, answers out, over one purchase call
    purchase/       what a free bundle is and the steps that hand one out (`Storefront`)
    exactly_once/   the executor: runs an operation once per idempotency key, knowing nothing of it
    seams/          one seam per kind of I/O: Table and Blob storage, Brevo, telemetry, templates
    config/         settings, secrets and keys, and the one error tree

One call goes upwards, made when the settings are read, never on import: `config.settings` checks
an operator's email templates with the purchase's own email rules, so a broken template stops the
start rather than a purchase. `runtime.py` builds the process's services from the settings.
Modules that used to sit directly in `shared/` still import by their old names
(`shared.settings`, `shared.idempotency`, ...): `shared._moved` maps each to its new home.
"""

from shared import _moved

__version__ = "0.1.0"

_moved.install()
