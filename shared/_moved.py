"""The old names of modules that moved into the layer packages, so that code written against
them keeps importing: `import shared.settings` gives the very module `shared.config.settings`
(the same object, so state and patches are shared), not a copy.

`shared.purchase` and `shared.exactly_once`, once modules, are now the packages that hold them;
their `__init__` hands out what the old modules did.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

# old name under `shared` -> its module now, under `shared`
MOVED = {
    "errors": "config.errors",
    "settings": "config.settings",
    "settings_reader": "config.settings_reader",
    "secret_strength": "config.secret_strength",
    "keys": "config.keys",
    "hashing": "config.hashing",
    "printable": "config.printable",
    "storage": "seams.storage",
    "receipts": "seams.receipts",
    "ledger": "seams.ledger",
    "repair": "seams.repair",
    "brevo": "seams.brevo",
    "telemetry": "seams.telemetry",
    "templates": "seams.templates",
    "idempotency": "exactly_once.idempotency",
    "idempotency_table": "exactly_once.idempotency_table",
    "purchase_operation": "purchase.operation",
    "purchase_guards": "purchase.guards",
    "purchase_fulfil": "purchase.fulfil",
    "purchase_receipt": "purchase.receipt",
    "purchase_call": "purchase.call",
    "catalog": "purchase.catalog",
    "names": "purchase.names",
    "schema": "purchase.schema",
    "mailbox": "purchase.mailbox",
    "governance": "purchase.governance",
    "tokens": "purchase.tokens",
    "signatures": "purchase.signatures",
    "emails": "purchase.emails",
    "http": "protocols.http",
    "api": "protocols.api",
    "pages": "protocols.pages",
    "failures": "protocols.failures",
    "readiness": "protocols.readiness",
    "downloads": "protocols.downloads",
    "openapi": "protocols.openapi",
    "openapi_paths": "protocols.openapi_paths",
    "openapi_schemas": "protocols.openapi_schemas",
    "mcp": "protocols.mcp",
    "mcp_elicit": "protocols.mcp_elicit",
    "mcp_legacy": "protocols.mcp_legacy",
    "mcp_modern": "protocols.mcp_modern",
    "mcp_tools": "protocols.mcp_tools",
    "request_state": "protocols.request_state",
    "a2a": "protocols.a2a",
    "a2a_answers": "protocols.a2a_answers",
    "a2a_card": "protocols.a2a_card",
    "a2a_protocol": "protocols.a2a_protocol",
    "a2a_requests": "protocols.a2a_requests",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str):
        self._target = target
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self._target)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec  # the import system stamped the alias's spec on it


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        package, _, name = fullname.rpartition(".")
        if package != "shared" or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(f"shared.{MOVED[name]}"))


def install() -> None:
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
