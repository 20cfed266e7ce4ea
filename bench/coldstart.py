"""Cold start: importing `function_app` against importing only its third-party dependencies, in
fresh interpreters, and whether the import opens a network connection."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from devstack.run import ROOT
from devstack.services import Stack

THIRD_PARTY = (
    "import azure.functions, azure.core, azure.data.tables, azure.storage.blob, requests, "
    "jose.jwt, jose.jws, cryptography.hazmat.primitives.asymmetric.ec"
)
NO_NETWORK = """
import socket, sys
opened = []
real_connect = socket.socket.connect
def connect(self, address):
    opened.append(address)
    return real_connect(self, address)
socket.socket.connect = connect
real_getaddrinfo = socket.getaddrinfo
def getaddrinfo(*args, **kwargs):
    opened.append(args[:2])
    return real_getaddrinfo(*args, **kwargs)
socket.getaddrinfo = getaddrinfo
import function_app
print(len(opened))
"""


def run(stack: Stack, runs: int = 9) -> dict:
    # As deployed: the app's modules compiled to bytecode once, like the site-packages they sit beside.
    env = {k: v for k, v in {**os.environ, **stack.env()}.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "function_app.py", "shared"], cwd=ROOT, env=env, check=True
    )

    def wall(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True)
        return time.perf_counter() - start

    wall("import function_app")  # fill the OS file cache for both
    app_times, deps_times = [], []
    for _ in range(runs):
        app_times.append(wall("import function_app"))
        deps_times.append(wall(THIRD_PARTY))
    connections = subprocess.run(
        [sys.executable, "-c", NO_NETWORK], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    app, deps = statistics.median(app_times), statistics.median(deps_times)
    return {
        "import_function_app_ms": round(app * 1000, 1),
        "import_third_party_ms": round(deps * 1000, 1),
        "ratio": round(app / deps, 3),
        "target": 1.15,
        "network_calls_at_import": int(connections),
    }
