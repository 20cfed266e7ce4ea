"""The exactly-once executor (`executor`) and the idempotency claims it holds (`idempotency`, with
`idempotency_table` its Azure Table store). Nothing here knows what the operation it runs does.

`shared.exactly_once` was the executor's module before it became this package, so its names are
still handed out here, on first use: `from shared.exactly_once import ExactlyOnce` works as it did.
They are the executor's own objects; patch them where they are used, in
`shared.exactly_once.executor`.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "UNKEYED",
    "VACANT",
    "CLAIMED",
    "RESUMED",
    "IN_PROGRESS",
    "REUSED",
    "STORE_DOWN",
    "UNPROTECTED",
    "CLAIM_UNCERTAIN",
    "RACED",
    "TAKEN_OVER",
    "UNRECORDED",
    "KEPT",
    "RELEASED",
    "HELD",
    "WORDS",
    "Done",
    "ExactlyOnce",
    "Key",
    "Operation",
    "Run",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("shared.exactly_once.executor"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
