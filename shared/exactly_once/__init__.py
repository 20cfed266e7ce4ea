"""The exactly-once executor (`executor`) and the idempotency claims it holds (`idempotency`, with
`idempotency_table` its Azure Table store). Nothing here knows what the operation it runs does.

`shared.exactly_once` was the executor's module before it became this package, so its names are
still handed out here (its `__all__`): `from shared.exactly_once import ExactlyOnce` works as it
did. They are the executor's own objects; patch them where they are used, in
`shared.exactly_once.executor`.
"""

from shared.exactly_once.executor import *  # noqa: F403 - the old module's names
from shared.exactly_once.executor import __all__  # noqa: F401
