"""The purchase: the catalog, the guards (governance, the name and schema checks), the steps that
hand out a bundle (`operation`, `guards`, `fulfil`, `receipt`, with `call` their shared records),
the download token, the signed receipt and the email, and `Storefront` wiring them to the executor.

`shared.purchase` was `Storefront`'s module before it became this package, so its names are still
handed out here, on first use (importing `shared.purchase.catalog` does not import them all):
`from shared.purchase import Storefront` works as it did. They are `shared.purchase.storefront`'s
own objects; patch them where they are used.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "OPERATION",
    "Caller",
    "Outcome",
    "PurchaseCall",
    "StoreConfig",
    "Storefront",
    "scoped_key_hash",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("shared.purchase.storefront"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
