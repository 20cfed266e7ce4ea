"""``python -m devstack.brevo_sandbox [--host H] [--port P] [--api-key K] [--tier T]
[--limit FAMILY=N/s|N/h|off ...]``: serve the sandbox until SIGTERM or SIGINT, after printing the
line tests wait for (``Brevo sandbox listening on ...``).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from http.server import ThreadingHTTPServer
from typing import Any, cast

from devstack.brevo_sandbox.limits import DEFAULT_TIER, FAMILIES, TIERS, parse_limit_option
from devstack.brevo_sandbox.server import make_server


def _limit_option(text: str) -> tuple[str, str]:
    try:
        return parse_limit_option(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m devstack.brevo_sandbox",
        description="Local stand-in for Brevo's HTTP API v3.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8025)
    parser.add_argument("--api-key", help="accept only this api-key (default: any non-empty key)")
    parser.add_argument(
        "--tier", choices=tuple(TIERS), default=DEFAULT_TIER, help="Brevo's rate limits for this tier"
    )
    parser.add_argument(
        "--limit",
        action="append",
        type=_limit_option,
        default=[],
        metavar="FAMILY=N/s|N/h|off",
        help=f"replace one family's limit (families: {', '.join(FAMILIES)}); repeatable, the last wins",
    )
    return parser.parse_args(argv)


def _stop_on_signals(server: ThreadingHTTPServer) -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be installed from the main thread

    def stop(signum: int, frame: Any) -> None:
        # shutdown() waits for serve_forever(), which runs in this very thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    server = make_server(args.host, args.port, args.api_key, tier=args.tier, limits=dict(args.limit))
    _stop_on_signals(server)
    host, port = cast("tuple[str, int]", server.server_address[:2])  # as getsockname() gave it
    print(f"Brevo sandbox listening on http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
