"""The storefront's soak: sustained load under injected faults, then its invariants checked (see
`python -m soak`)."""
