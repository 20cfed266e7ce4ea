"""The finance ledger: one Table entity per fulfilled receipt, spread over `SHARDS` partitions
per UTC issue day, so a day's receipts and totals are one range query away and no partition
carries a whole day's writes.

A row holds the billing figures and nothing about the buyer, and is an upsert into its receipt's
one shard, so a receipt is recorded once. `has` looks in the bare day's partition only when the
shard misses; a listing reads every shard and the bare day, counts a receipt once, and orders by
issue time, then receipt id.
docs/receipts.md#finance-views-the-receipt-page-and-the-days-listing has the layout.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from shared.config.errors import InvalidRequest
from shared.seams.storage import on_table, outage

WHAT = "ledger table"
DAY_PATTERN = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
MAX_PAGE_SIZE = 200
# Partitions per day. Every purchase touches its day's ledger twice (the row's write, the repair
# timer's read): over 16 shards that is 0.125 entities per purchase on each, so a shard reaches
# Azure's 2,000 entities/s per partition at 16,000 purchases/s, far past the ~1,300/s at which a
# purchase's ~15 calls use up the account's 20,000 requests/s. Changing it moves receipts to other
# shards: `has` would miss the rows of receipts the repair timer has yet to settle, and the timer
# would write them again (the listing still counts each receipt once).
SHARDS = 16
# The listing reads [day, day + "~"): exactly the keys that are the day or the day followed by a
# character below "~", the shards' "_" among them. Another day differs within its first ten
# characters and `repair-blob` in its first, so neither falls inside.
_AFTER_DAY = "~"
_WHOLE_DAY = "PartitionKey ge @day and PartitionKey lt @end"


def money(amount: Decimal) -> str:
    """At least two decimals, never rounded away: 0.01 → "0.01", 0.005 → "0.005"."""
    return f"{amount:.2f}" if amount == amount.quantize(Decimal("0.01")) else str(amount.normalize())


@dataclass(frozen=True)
class LedgerEntry:
    receipt_id: str
    issued_at: str
    bundle_id: str
    bundle_title: str
    amount: str
    currency: str
    cost_estimate: str
    cost_currency: str
    agent_origin: str = ""  # the verified agent that asked (Web Bot Auth); "" when unverified
    agent_key: str = ""  # its key's JWK thumbprint

    @classmethod
    def from_receipt(cls, receipt: dict) -> LedgerEntry:
        billing, bundle = receipt["billing"], receipt.get("bundle") or {}
        agent = (receipt.get("caller") or {}).get("agent") or {}
        verified = agent.get("verified") is True
        return cls(
            receipt_id=receipt["receipt_id"],
            issued_at=receipt["issued_at"],
            bundle_id=bundle.get("id", ""),
            bundle_title=bundle.get("title", ""),
            amount=billing["amount"],
            currency=billing["currency"],
            cost_estimate=billing["cost_estimate"],
            cost_currency=billing["cost_currency"],
            agent_origin=str(agent.get("origin", "")) if verified else "",
            agent_key=str(agent.get("key_thumbprint", "")) if verified else "",
        )

    def as_dict(self) -> dict[str, str]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class DayListing:
    date: str
    receipts: list[LedgerEntry]
    count: int
    totals: dict[str, dict[str, str]]  # currency → {"amount", "cost_estimate"}
    next_cursor: str | None

    def as_dict(self) -> dict:
        return {
            "date": self.date,
            "count": self.count,
            "totals": self.totals,
            "receipts": [entry.as_dict() for entry in self.receipts],
            "next_cursor": self.next_cursor,
        }


class TableLedger:
    def __init__(self, table: TableClient):
        self._table = table

    def add(self, receipt: dict) -> None:
        entry = LedgerEntry.from_receipt(receipt)
        entity = {
            "PartitionKey": shard_of(entry.issued_at[:10], entry.receipt_id),
            "RowKey": entry.receipt_id,
            **_columns(entry),
        }
        try:
            on_table(self._table, WHAT, lambda: self._table.upsert_entity(entity, mode=UpdateMode.REPLACE))
        except ResourceNotFoundError as exc:
            raise outage(exc, WHAT) from exc

    def has(self, date: str, receipt_id: str) -> bool:
        """Whether the receipt has its row on that day: one point read on its shard, and only when
        that misses, one on the day's partition from before the shards. Raises StorageOutage."""
        return self._found(shard_of(date, receipt_id), receipt_id) or self._found(date, receipt_id)

    def _found(self, partition: str, receipt_id: str) -> bool:
        try:
            self._table.get_entity(partition, receipt_id, select=["RowKey"])
        except ResourceNotFoundError:
            return False
        except AzureError as exc:
            raise outage(exc, WHAT) from exc
        return True

    def day(self, date: str, *, page_size: int = 50, cursor: str | None = None) -> DayListing:
        """One page of the day's receipts, earliest issued first (then by receipt id), with the
        whole day's totals."""
        if not _is_day(date):
            raise InvalidRequest("date must be a calendar day, YYYY-MM-DD", code="invalid_date")
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise InvalidRequest(f"page_size must be 1-{MAX_PAGE_SIZE}", code="invalid_page_size")
        after = _decode_cursor(cursor)
        try:
            bounds = {"day": date, "end": date + _AFTER_DAY}
            entities = self._table.query_entities(_WHOLE_DAY, parameters=bounds)
            entries = sorted(_one_per_receipt(entities), key=_order)
        except ResourceNotFoundError:
            return DayListing(date, [], 0, {}, None)
        except AzureError as exc:
            raise outage(exc, WHAT) from exc
        later = entries if after is None else [entry for entry in entries if _order(entry) > after]
        page = later[:page_size]
        next_cursor = _encode_cursor(_order(page[-1])) if len(later) > page_size else None
        return DayListing(date, page, len(entries), _totals(entries), next_cursor)


def shard_of(day: str, receipt_id: str) -> str:
    """The partition of a receipt's row on its day: `{day}_{shard:02d}`, the shard the receipt
    id's SHA-256 modulo SHARDS, the same on every instance."""
    shard = int.from_bytes(hashlib.sha256(receipt_id.encode()).digest()[:8], "big") % SHARDS
    return f"{day}_{shard:02d}"


def _one_per_receipt(entities: Iterable[dict]) -> list[LedgerEntry]:
    """One entry per receipt id. A receipt can have a row in the bare day and one in its shard
    (an instance from before the shards recorded it while this version did too); a query answers
    in PartitionKey order, so the shard's row, later, is the one kept."""
    return list({entity["RowKey"]: _entry(entity) for entity in entities}.values())


def _totals(entries: list[LedgerEntry]) -> dict[str, dict[str, str]]:
    """Amount and cost estimate summed per currency."""
    sums: dict[str, tuple[Decimal, Decimal]] = {}
    for entry in entries:
        amount, cost = sums.get(entry.currency, (Decimal(0), Decimal(0)))
        sums[entry.currency] = (amount + Decimal(entry.amount), cost + Decimal(entry.cost_estimate))
    return {
        currency: {"amount": f"{amount:.2f}", "cost_estimate": money(cost)}
        for currency, (amount, cost) in sorted(sums.items())
    }


def _order(entry: LedgerEntry) -> tuple[str, str]:
    return entry.issued_at, entry.receipt_id


def _columns(entry: LedgerEntry) -> dict[str, str]:
    return {
        "IssuedAt": entry.issued_at,
        "BundleId": entry.bundle_id,
        "BundleTitle": entry.bundle_title,
        "Amount": entry.amount,
        "Currency": entry.currency,
        "CostEstimate": entry.cost_estimate,
        "CostCurrency": entry.cost_currency,
        "AgentOrigin": entry.agent_origin,
        "AgentKey": entry.agent_key,
    }


def _entry(entity) -> LedgerEntry:
    return LedgerEntry(
        receipt_id=entity["RowKey"],
        issued_at=entity["IssuedAt"],
        bundle_id=entity["BundleId"],
        bundle_title=entity["BundleTitle"],
        amount=entity["Amount"],
        currency=entity["Currency"],
        cost_estimate=entity["CostEstimate"],
        cost_currency=entity["CostCurrency"],
        agent_origin=entity.get("AgentOrigin", ""),  # rows written before agents were verified have none
        agent_key=entity.get("AgentKey", ""),
    )


def _is_day(text: str) -> bool:
    if not DAY_PATTERN.fullmatch(text):
        return False
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _encode_cursor(last: tuple[str, str]) -> str:
    """The cursor after `last`, the (issue time, receipt id) of the last receipt on a page."""
    return base64.urlsafe_b64encode(json.dumps({"after": list(last)}).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str | None) -> tuple[str, str] | None:
    if not cursor:
        return None
    try:
        token = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, TypeError, RecursionError):
        raise InvalidRequest("cursor is not one this endpoint issued", code="invalid_cursor") from None
    if isinstance(token, dict) and "RowKey" in token:
        raise InvalidRequest(
            "cursor is from an earlier version of this listing; open the day's first page again",
            code="invalid_cursor",
        )
    after = token.get("after") if isinstance(token, dict) and set(token) == {"after"} else None
    if (
        not isinstance(after, list)
        or len(after) != 2
        or not all(isinstance(v, str) and v and v.isascii() and v.isprintable() for v in after)
    ):
        raise InvalidRequest("cursor is not one this endpoint issued", code="invalid_cursor")
    return after[0], after[1]
