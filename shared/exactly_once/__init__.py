"""The exactly-once executor (`executor`) and the idempotency claims it holds (`idempotency`, with
`idempotency_table` its Azure Table store). Nothing here knows what the operation it runs does.

`shared.exactly_once` was the executor's module before it became this package, so its names are
still handed out here: `from shared.exactly_once import ExactlyOnce` works as it did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__") or Path(__file__).with_name(f"{name}.py").exists():  # a submodule
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from shared.exactly_once import executor

    return getattr(executor, name)
