"""Settings and errors: the settings read and checked once at start-up, the secrets and signing
keys they name, the keyed hashes made with them, and the one error tree every layer raises from."""
