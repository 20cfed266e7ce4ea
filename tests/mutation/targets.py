"""What `make mutate` mutates: one target per core module, with the in-process tests that run
against each mutant (never the dev-host or whole-suite tests: a mutant is tested in a forked
worker, and every worker starts its own Azurite and sandbox)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    name: str
    source: str
    tests: tuple[str, ...]
    scope: str = ""  # a class whose mutants the floor applies to ("" : the whole module)
    floor: float = 0.0  # the least score, in percent of the non-equivalent mutants, that passes

    @property
    def module(self) -> str:
        return self.source.removesuffix(".py").replace("/", ".")


# What was one class, Storefront, is the exactly-once executor and the purchase's steps: each
# module keeps the floor the class had, against the purchase's own tests (and the executor's).
PURCHASE_TESTS = ("tests/shared/purchase/test_purchase.py", "tests/shared/purchase/test_purchase_answers.py")

TARGETS = (
    Target(
        "executor",
        "shared/exactly_once/executor.py",
        ("tests/shared/exactly_once/test_executor.py", *PURCHASE_TESTS),
        scope="_Held",
        floor=90.0,
    ),
    Target("purchase", "shared/purchase/operation.py", PURCHASE_TESTS, scope="PurchaseOperation", floor=90.0),
    Target("purchase_guards", "shared/purchase/guards.py", PURCHASE_TESTS, floor=90.0),
    Target("purchase_fulfillment", "shared/purchase/fulfillment.py", PURCHASE_TESTS, floor=90.0),
    Target("purchase_receipt", "shared/purchase/receipt/issue.py", PURCHASE_TESTS, floor=90.0),
    Target(
        "governance",
        "shared/purchase/governance.py",
        ("tests/shared/purchase/test_governance.py", "tests/shared/purchase/test_governance_limits.py"),
        floor=90.0,
    ),
    # The claim state machine's races and outages are pinned where a caller meets them: the answers.
    Target(
        "idempotency",
        "shared/exactly_once/idempotency.py",
        ("tests/shared/exactly_once/test_idempotency.py", "tests/shared/purchase/test_purchase_answers.py"),
    ),
    Target(
        "signatures", "shared/purchase/receipt/signatures.py", ("tests/shared/purchase/test_signatures.py",)
    ),
    Target("tokens", "shared/purchase/tokens.py", ("tests/shared/purchase/test_tokens.py",)),
)
