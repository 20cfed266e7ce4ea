"""Verify a storefront receipt: was it issued by the store, and is every byte as issued?

    python -m ops.verify_receipt RECEIPT_URL_OR_FILE [--jwks URL_OR_FILE] [--allow-reformatted]

A receipt URL's JWKS comes from that same host; a saved file needs `--jwks`, never a host the
receipt names. The check is a standard JOSE verification (ES256, key by `kid`) of the detached
signature over the canonical form, plus a byte-exact comparison. Prints one verdict line, its
untrusted text escaped, and exits 0 when valid, 1 when not, 2 when the input cannot be read.
The details: docs/receipts.md#verifying-a-receipt.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from urllib.parse import urlsplit

from shared.config.printable import printable
from shared.purchase.receipt.signatures import verify
from shared.seams.public_fetch import FetchFailed, PublicFetcher

JWKS_PATH = "/.well-known/jwks.json"
# Where stores published their keys before the domain-root path; the same keys are still there.
OLD_JWKS_PATH = "/api/.well-known/jwks.json"
# A receipt or key set is a few KiB; a host that sends more, or slower, is not a store. Any
# address: the operator checks receipts of their own store, which may be on localhost.
FETCHER = PublicFetcher(local=True, timeout=15, max_bytes=1024 * 1024)
# What an auditor holding a copy reformatted on the way (an A2A client's, a pretty-printed file)
# can still check: the signed content, whatever its whitespace and number spelling.
REFORMATTED_HINT = (
    "its signed content is intact, so a copy reformatted on the way (an A2A client's, a "
    "pretty-printed file) verifies with --allow-reformatted, which checks the signature over the "
    "content and accepts changed whitespace and number spelling"
)


class Unreadable(Exception):
    """The receipt or the JWKS could not be fetched or read."""


class NotServed(Unreadable):
    """The host answered, but with a status other than 200."""


def load(source: str, accept: str = "application/json") -> bytes:
    if source.startswith(("http://", "https://")):
        try:
            response = FETCHER.get(source, accept)
        except FetchFailed as exc:
            raise Unreadable(f"cannot fetch {source}: {exc}") from None
        if response.status != 200:
            raise NotServed(f"cannot fetch {source}: HTTP {response.status}")
        return response.body
    try:
        return Path(source).read_bytes()
    except OSError as exc:
        raise Unreadable(f"cannot read {source}: {exc.strerror}") from None


def store_jwks(source: str) -> bytes:
    """The JWKS of the host the receipt URL points at: the domain-root path, else (an answer other
    than 200, or a body that is no key set) the /api/ path older stores serve; files need --jwks."""
    if not source.startswith(("http://", "https://")):
        raise Unreadable("a receipt file needs --jwks: the store's JWKS URL or a saved copy")
    parts = urlsplit(source)
    origin = f"{parts.scheme}://{parts.netloc}"
    try:
        body = load(origin + JWKS_PATH)
    except NotServed as exc:
        reason = str(exc)
    else:
        if _is_key_set(body):
            return body
        reason = f"{origin}{JWKS_PATH} is not a JWKS"
    try:
        return load(origin + OLD_JWKS_PATH)
    except Unreadable as exc:
        raise Unreadable(f"{reason}; {exc}") from None


def _is_key_set(body: bytes) -> bool:
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(document, dict) and isinstance(document.get("keys"), list)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except Exception as exc:  # noqa: BLE001 - whatever the input does, the answer is a verdict line
        return _say(2, "UNREADABLE", f"the receipt could not be checked ({type(exc).__name__})")


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.verify_receipt", description=__doc__.splitlines()[0])
    parser.add_argument("receipt", help="receipt URL or file")
    parser.add_argument("--jwks", help="JWKS URL or file (default: the store's, by the receipt's host)")
    parser.add_argument(
        "--allow-reformatted",
        action="store_true",
        help="accept a copy whose signed content is intact but whose whitespace or numbers were rewritten",
    )
    args = parser.parse_args(argv)
    try:
        body = load(args.receipt)
        jwks = json.loads(load(args.jwks) if args.jwks else store_jwks(args.receipt))
    except (Unreadable, ValueError, RecursionError) as exc:
        return _say(2, "UNREADABLE", str(exc))
    if not isinstance(jwks, dict):
        return _say(2, "UNREADABLE", "the JWKS is not a JSON object")
    verdict = verify(body, jwks, exact_bytes=not args.allow_reformatted)
    receipt_id = _receipt_id(body)
    if verdict.valid:
        exact = not args.allow_reformatted or verify(body, jwks, exact_bytes=True).valid
        state = "unaltered" if exact else "its signed content unaltered, its bytes reformatted"
        return _say(0, "VALID", f"receipt {receipt_id} is {verdict.reason}, {state}")
    if not args.allow_reformatted and verify(body, jwks, exact_bytes=False).valid:
        return _say(1, "INVALID", f"receipt {receipt_id}: {verdict.reason}; {REFORMATTED_HINT}")
    return _say(1, "INVALID", f"receipt {receipt_id}: {verdict.reason}")


def _say(status: int, verdict: str, detail: str) -> int:
    """Print the verdict line, the untrusted detail escaped, and return the exit status. A
    character the terminal's encoding lacks is written as a backslash escape, never an error."""
    encoding = sys.stdout.encoding or "utf-8"
    line = f"{verdict}: {printable(detail)}"
    print(line.encode(encoding, "backslashreplace").decode(encoding, "replace"))
    return status


def _receipt_id(body: bytes) -> str:
    try:
        receipt = json.loads(body)
    except (ValueError, RecursionError):
        return "(unreadable)"
    if not isinstance(receipt, dict):
        return "(not an object)"
    receipt_id = receipt.get("receipt_id", "(no id)")
    return receipt_id if isinstance(receipt_id, str) else "(id not a string)"


if __name__ == "__main__":
    sys.exit(main())
