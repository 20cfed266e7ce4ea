"""The purchase: the catalog, the guards (governance, the name and schema checks), the steps that
hand out a bundle (`operation`, `guards`, `fulfil`, `receipt`, with `call` their shared records),
the download token, the signed receipt and the email, and `Storefront` wiring them to the executor.

`shared.purchase` was `Storefront`'s module before it became this package, so its names are still
handed out here, on first use: `from shared.purchase import Storefront` works as it did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__") or Path(__file__).with_name(f"{name}.py").exists():  # a submodule
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from shared.purchase import storefront

    return getattr(storefront, name)
