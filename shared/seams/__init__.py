"""The stores and seams: one small module per kind of I/O (Table and Blob storage, the receipt
store and ledger with their repair queue, Brevo, telemetry, templates), turning vendor errors into
the store's own at their edge."""
