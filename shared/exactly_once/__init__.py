"""The exactly-once executor (`executor`) and the idempotency claims it holds (`idempotency`).
Nothing here knows what the operation it runs does."""
