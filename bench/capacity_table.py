"""The capacity model (`bench.capacity`) as the table `make bench` prints."""

from __future__ import annotations

from bench.capacity import QUEUE_MESSAGES_PER_SECOND

COLUMNS = ("cost shard", "ledger shard", "contact queue")  # shared classes shown, when a row has them


def table(capacity: dict) -> list[str]:
    t = capacity["targets"]
    shown = [c for c in COLUMNS if c == "cost shard" or any(c in row["classes"] for row in capacity["rows"])]
    lines = [
        f"Capacity of one storage account (targets: {t['account_requests_per_second']:,} requests/s per "
        f"account, {t['partition_entities_per_second']:,} entities/s per table partition, "
        f"{t.get('queue_messages_per_second', QUEUE_MESSAGES_PER_SECOND):,} messages/s per queue)",
        f"  {'path':<14} {'shards':>6} {'calls':>6} {'later':>6}{''.join(f'  {c:>12}' for c in shown)} "
        f"{'ceiling/s':>10}  {'first target hit':<22} {'next/s':>7}  next target hit",
    ]
    moves: dict[str, str] = {}
    for row in capacity["rows"]:
        busiest = "".join(
            f"  {row['classes'].get(c, {}).get('busiest_partition_per_purchase', 0):>12}" for c in shown
        )
        following = row["next_limit"] or "-"
        next_per_second = f"{row['next_ceiling_per_second']:,}" if row["next_limit"] else "-"
        lines.append(
            f"  {row['path']:<14} {row['cost_shards']:>6} {row['calls_per_purchase']:>6} "
            f"{row['later_calls_per_purchase']:>6}{busiest} "
            f"{row['ceiling_per_second']:>10,}  {row['first_limit']:<22} {next_per_second:>7}  {following}"
        )
        moves[row["first_limit"]] = row["moved_by"]
        if row["next_limit"]:
            moves[row["next_limit"]] = row["next_moved_by"]
    lines += [
        f"  (calls: on the request path; later: the timers' share per purchase; {', '.join(shown)}: "
        "entities per purchase",
        "  on the busiest partition of each; a million bundles a day is "
        f"{capacity['a_million_a_day_per_second']} purchases/s)",
        "  what moves each target hit:",
        *(f"    {limit:<24} {moved}" for limit, moved in moves.items()),
    ]
    return lines
