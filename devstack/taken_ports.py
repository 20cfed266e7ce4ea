"""What `make run` says when a port it needs is taken: which port, for which service, and the
two commands (`make run PORT=…` and `python -m devstack.run --port …`) that start the stack on
free ports found next to the ones asked for."""

from __future__ import annotations

import shlex
import socket
import sys
from pathlib import Path

from devstack.ports import bindable

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_STORAGE_PORT = 10000  # blob; queue and table follow, as UseDevelopmentStorage=true expects
DEFAULT_SANDBOX_PORT = 8025
DEFAULT_HOST_PORT = 7071
DEFAULT_DATA_DIR = ROOT / ".azurite"
SEARCHED = 200  # blocks of ports tried above each taken one: a few milliseconds on loopback


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def taken(host_port: int, sandbox_port: int, storage_port: int) -> list[str]:
    """Each port of the stack something already listens on, with the service that needs it."""
    wanted = {
        host_port: "the Functions host",
        sandbox_port: "the Brevo sandbox",
        storage_port: "Azurite's blob service",
        storage_port + 1: "Azurite's queue service",
        storage_port + 2: "Azurite's table service",
    }
    return [f"{port} ({name})" for port, name in sorted(wanted.items()) if listening(port)]


def _free(port: int) -> bool:
    return 1024 <= port <= 65535 and not listening(port) and bindable(port)


def _next_free(first: int, count: int, chosen: set[int]) -> int | None:
    """`first`, or the nearest block of `count` ports above it that are all free and unchosen."""
    for base in range(first, first + SEARCHED * count, count):
        if all(p not in chosen and _free(p) for p in range(base, base + count)):
            return base
    return None


def free_ports_near(host_port: int, sandbox_port: int, storage_port: int) -> tuple[int, int, int] | None:
    """The stack's ports, each taken one moved up to the next free one (three in a row for
    Azurite), none shared; None when nothing free is found near them."""
    storage = _next_free(storage_port, 3, set())
    if storage is None:
        return None
    chosen = {storage, storage + 1, storage + 2}
    sandbox = _next_free(sandbox_port, 1, chosen)
    if sandbox is None:
        return None
    host = _next_free(host_port, 1, chosen | {sandbox})
    return None if host is None else (host, sandbox, storage)


def _python() -> str:
    """This interpreter as a reader in the checkout types it (`.venv/bin/python`)."""
    python = Path(sys.executable)
    return str(python.relative_to(ROOT)) if python.is_relative_to(ROOT) else shlex.quote(str(python))


def start_commands(host_port: int, sandbox_port: int, storage_port: int, data_dir: Path) -> list[str]:
    """`make run` and `python -m devstack.run` for this stack, naming what differs from the
    defaults; either starts it, from the checkout."""
    make, python = ["make run"], [_python(), "-m devstack.run"]
    for variable, option, port, default in (
        ("PORT", "--port", host_port, DEFAULT_HOST_PORT),
        ("SANDBOX_PORT", "--sandbox-port", sandbox_port, DEFAULT_SANDBOX_PORT),
        ("STORAGE_PORT", "--storage-port", storage_port, DEFAULT_STORAGE_PORT),
    ):
        if port != default:
            make.append(f"{variable}={port}")
            python.append(f"{option} {port}")
    if data_dir.resolve() != DEFAULT_DATA_DIR.resolve():
        folder = shlex.quote(str(data_dir))
        make.append(f"DATA_DIR={folder}")
        python.append(f"--data-dir {folder}")
    return [" ".join(make), " ".join(python)]


def advice(busy: list[str], host_port: int, sandbox_port: int, storage_port: int, data_dir: Path) -> str:
    """The message for ports in use (`busy`, from `taken`): free ones to start on instead, or
    the commands' shape when none is near."""
    ports = f"port {busy[0]} is" if len(busy) == 1 else f"ports {', '.join(busy)} are"
    free = free_ports_near(host_port, sandbox_port, storage_port)
    if free is None:
        shape = "--port <port> --sandbox-port <port> --storage-port <first of three>"
        commands = [
            "make run PORT=<port> SANDBOX_PORT=<port> STORAGE_PORT=<first of three>",
            f"{_python()} -m devstack.run {shape}",
        ]
    else:
        commands = start_commands(*free, data_dir)
    return "\n".join(
        [
            f"{ports} already in use. Stop whatever listens there, or start on free ports "
            "(Azurite takes STORAGE_PORT and the two after it), from the checkout:",
            *(f"  {command}" for command in commands),
        ]
    )
