"""Local development host for an Azure Functions Python v2 app, in place of ``func start``.

``python -m devstack.devhost [--host H] [--port P] [--app-dir DIR] [--timers all|none|NAMES]``:
serve the app in DIR until SIGTERM or SIGINT, after printing its functions and ``Host started on
<url>``, running its timer triggers on their schedules as ``func start`` does (all of them unless
``--timers`` names fewer).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from devstack.devhost.server import banner, make_server, scheduled_timers


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m devstack.devhost", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7071)
    parser.add_argument("--app-dir", default=".", help="directory holding function_app.py (default: .)")
    parser.add_argument(
        "--timers",
        default="all",
        help="timer triggers to run on their schedules: all (as func start does), none, or names "
        "separated by commas (default: all)",
    )
    return parser.parse_args(argv)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="[%(asctime)s] %(message)s")
    app_dir = Path(args.app_dir).resolve()
    os.chdir(app_dir)  # func start runs functions with the app directory as working directory
    server = make_server(app_dir, args.host, args.port)
    try:
        timers = scheduled_timers(server, args.timers)
    except ValueError as exc:
        server.server_close()
        print(f"--timers: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupt)
    try:  # a stop may come as soon as the banner says the host is up, before it serves
        print(banner(server), flush=True)
        timers.start()
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        timers.stop()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
