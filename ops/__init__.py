"""Operator and release tools: verify a receipt's signature, build the zip a publish uploads.
Never deployed."""
