"""The finance ledger: one Table entity per fulfilled receipt, partitioned by UTC issue day, so a
day's receipts and totals are one partition query away.

PartitionKey is the day (`2026-11-30`), RowKey the receipt id; the entity holds the billing figures
and nothing about the buyer. Writing is an upsert, so a purchase finished by a second instance
after a crash records its receipt once.

A listing reads the whole day in one partition scan, which the day's totals need anyway, and
orders it by issue time, then receipt id (Table storage would order it by RowKey, a random id);
the cursor names the last receipt shown.
"""

from __future__ import annotations

import base64
import datetime
import json
import re
from dataclasses import dataclass
from decimal import Decimal

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from shared.config.errors import InvalidRequest
from shared.seams.receipts import money
from shared.seams.storage import on_table, outage

WHAT = "ledger table"
DAY_PATTERN = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
MAX_PAGE_SIZE = 200


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

    @classmethod
    def from_receipt(cls, receipt: dict) -> LedgerEntry:
        billing, bundle = receipt["billing"], receipt.get("bundle") or {}
        return cls(
            receipt_id=receipt["receipt_id"],
            issued_at=receipt["issued_at"],
            bundle_id=bundle.get("id", ""),
            bundle_title=bundle.get("title", ""),
            amount=billing["amount"],
            currency=billing["currency"],
            cost_estimate=billing["cost_estimate"],
            cost_currency=billing["cost_currency"],
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

    def record(self, receipt: dict) -> None:
        entry = LedgerEntry.from_receipt(receipt)
        entity = {"PartitionKey": entry.issued_at[:10], "RowKey": entry.receipt_id, **_columns(entry)}
        try:
            on_table(self._table, WHAT, lambda: self._table.upsert_entity(entity, mode=UpdateMode.REPLACE))
        except ResourceNotFoundError as exc:
            raise outage(exc, WHAT) from exc

    def has(self, date: str, receipt_id: str) -> bool:
        """Whether the receipt has its row on that day. Raises StoreUnavailable."""
        try:
            self._table.get_entity(date, receipt_id, select=["RowKey"])
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
            entities = self._table.query_entities("PartitionKey eq @day", parameters={"day": date})
            entries = sorted(map(_entry, entities), key=_order)
        except ResourceNotFoundError:
            return DayListing(date, [], 0, {}, None)
        except AzureError as exc:
            raise outage(exc, WHAT) from exc
        later = entries if after is None else [entry for entry in entries if _order(entry) > after]
        page = later[:page_size]
        next_cursor = _encode_cursor(_order(page[-1])) if len(later) > page_size else None
        return DayListing(date, page, len(entries), _totals(entries), next_cursor)


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
