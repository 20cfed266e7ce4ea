"""Test helpers: buyers that each call from a loopback address of their own (`Buyer`), signing
keys, code run in a fresh interpreter or as a user runs a module, and the contact queue drained
when a test asks. Starting the services is `devstack.services`.

Every test buys with its own email, key and client address, so tests sharing one host and one
Azurite never see each other's data or limits.
"""

from __future__ import annotations

import base64
import fcntl
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from devstack.loopback import client_from
from devstack.node import NODE22_BIN
from shared.purchase.catalog import BUNDLES
from shared.purchase.contacts import ContactDrainer, Drained
from shared.seams.brevo import BrevoClient
from shared.seams.contact_queue import ContactQueue, open_queue
from shared.seams.lease import TableLease
from shared.seams.storage import table_client
from shared.seams.storage_probe import REUSE_SECONDS

ROOT = Path(__file__).resolve().parent.parent
# A bound on a hang, never on speed: a process, a stack or a command that works ends long before
# it even on a 2-core machine under the whole suite's load; only one that hangs reaches it.
HANG_SECONDS = 600
# `make -o` for each install stamp: a make the tests run takes the installs as done, so it never
# reinstalls (in a worktree, whose links share the main checkout's .venv and Node 22, it would
# empty them).
STAMPS = (".venv/.installed", "node_modules/.installed", "devstack/node22/node_modules/.installed")
INSTALLED = [flag for stamp in STAMPS for flag in ("-o", stamp)]
_addresses = itertools.count(1)


def absent_bundle_id(stem: str) -> str:
    """`stem`, numbered if need be, as a bundle id the catalog lacks whatever bundles were added
    to it (docs/development.md's own bundle): a test of an unknown id never names a real one."""
    candidate = stem
    for n in itertools.count(2):
        if candidate not in BUNDLES:
            return candidate
        candidate = f"{stem}-{n}"
    raise AssertionError("unreachable")


UNKNOWN_BUNDLE_ID = absent_bundle_id("no-such-bundle")


def new_ec_key() -> ec.EllipticCurvePrivateKey:
    """A fresh P-256 key, as the store signs with."""
    return ec.generate_private_key(ec.SECP256R1())


def private_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def public_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def fresh_python(
    code: str, env: dict[str, str] | None = None, timeout: float = HANG_SECONDS
) -> subprocess.CompletedProcess:
    """`code` run by a new interpreter in the repository (what importing the app does there, with
    these settings and nothing this process has imported), its output captured as text."""
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def run_module(module: str, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`python -m module argv...` run in the repository as a user would, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", module, *argv],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )


def shell_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (this process's by default) as a shell has it before `make`: without the Node 22
    that the suite puts first on PATH."""
    env = dict(os.environ if env is None else env)
    env["PATH"] = os.pathsep.join(e for e in env["PATH"].split(os.pathsep) if e != str(NODE22_BIN))
    return env


def as_a_background_job(command: list[str]) -> list[str]:
    """`command` (a Python one) started as a shell starts a background job (`make run &`, nohup,
    a script): with SIGINT ignored, which the program inherits."""
    shim = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
        "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
    )
    assert command[0] == sys.executable, command
    return [sys.executable, "-c", shim, *command[1:]]


def unique_address() -> str:
    """A fresh loopback address (all of 127.0.0.0/8 is loopback), so each test has its own
    rate-limit bucket."""
    n = next(_addresses) + (os.getpid() % 50) * 1000
    return f"127.{20 + n // 62500}.{n // 250 % 250}.{n % 250 + 1}"


def unique_email(tag: str = "buyer") -> str:
    return f"{tag}.{uuid.uuid4().hex[:12]}@example.org"


def unique_key() -> str:
    return f"key-{uuid.uuid4().hex}"


def own_queue(storage: str, secret: str = "unit-test-secret", transport=None) -> ContactQueue:
    """A contact queue of its own (two shards) in this Azurite, for one test's store."""
    prefix = f"contacts-{uuid.uuid4().hex[:12]}"
    return open_queue(storage, prefix, 2, secret, 5, transport)


def drain_queue(queue: ContactQueue, storage: str, brevo_url: str, list_id: int = 2) -> Drained:
    """One run of a contact drainer over `queue`, in process, as a host's timer runs it: the
    buyers waiting become contacts in the Brevo at `brevo_url` (its `/v3` base). Its lease is in
    a table of its own, dropped afterwards."""
    table = table_client(storage, f"lease{uuid.uuid4().hex[:10]}", 5)
    brevo = BrevoClient(requests.Session(), brevo_url, "unit-test-key", 5)
    try:
        return ContactDrainer(queue, brevo, TableLease(table, "contact-drainer", 60), list_id).run()
    finally:
        table.delete_table()


def drain_contacts(host_url: str) -> None:
    """Run the host's contact drainer now (`POST /admin/functions/drain_contacts`, answered once
    the run is over). A run that finds another instance holding the drainer's lease does
    nothing, so callers poll (`wait_for_contact`, `drain_until_empty`)."""
    answer = requests.post(f"{host_url}/admin/functions/drain_contacts", json={"input": ""}, timeout=300)
    assert answer.status_code == 202, (answer.status_code, answer.text)


def contacts_waiting(host_url: str) -> int | None:
    """Buyers on the contact queue, handed to no drainer or held by one, as the host's health
    counts them; None when the queue could not be read."""
    contacts = requests.get(f"{host_url}/api/health", timeout=30).json()["contacts"]
    return None if contacts is None else contacts["waiting"]


def wait_for_contact(host_url: str, mail, email: str, timeout: float = 90.0) -> dict:
    """The Brevo contact for `email` (as `mail.contact` shows it) once the host's drainer has made
    it: drains until the sandbox has it, or fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        drain_contacts(host_url)
        found = mail.contact(email)
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"no Brevo contact for {email} after draining for {timeout:g} s")
        time.sleep(0.5)


def drain_until_empty(host_url: str, timeout: float = 90.0) -> None:
    """Drain the contact queue until no buyer waits on it, so that a contact not made by then
    never will be; fails after `timeout` seconds (a drainer killed mid-run hides its messages for
    a minute)."""
    deadline = time.monotonic() + timeout
    while True:
        drain_contacts(host_url)
        time.sleep(REUSE_SECONDS + 0.2)  # health reuses a probe for 2 s: read one made after the run
        if contacts_waiting(host_url) == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"the contact queue still had buyers waiting after {timeout:g} s")


@dataclass
class Buyer:
    """One test's identity: its own client address, email and idempotency key."""

    host: str
    address: str = field(default_factory=unique_address)
    email: str = field(default_factory=unique_email)
    key: str = field(default_factory=unique_key)

    def __post_init__(self) -> None:
        self.http = client_from(self.address)

    def purchase(self, payload: dict | None = None, headers: dict | None = None, **kw) -> requests.Response:
        body = {"email": self.email} if payload is None else payload
        return self.http.post(f"{self.host}/api/a2a/purchase", json=body, headers=headers, timeout=30, **kw)

    def post_raw(self, path: str, data: bytes, headers: dict | None = None) -> requests.Response:
        return self.http.post(f"{self.host}{path}", data=data, headers=headers, timeout=30)

    def mcp(self, method: str, params: dict | None = None, headers: dict | None = None, rpc_id=1):
        message = {"jsonrpc": "2.0", "id": rpc_id, "method": method}
        if params is not None:
            message["params"] = params
        return self.http.post(
            f"{self.host}/api/a2a/mcp",
            json=message,
            headers={"Accept": "application/json, text/event-stream", **(headers or {})},
            timeout=30,
        )

    def call_tool(self, arguments: dict, headers: dict | None = None) -> requests.Response:
        return self.mcp("tools/call", {"name": "purchase_free_bundle", "arguments": arguments}, headers)


def off_curve(jwk: dict) -> dict:
    """A public JWK with one bit of its y coordinate flipped: no longer a point on P-256."""
    y = bytearray(base64.urlsafe_b64decode(jwk["y"] + "=="))
    y[-1] ^= 1
    return {**jwk, "y": base64.urlsafe_b64encode(bytes(y)).rstrip(b"=").decode()}


# Tool names no client should send: as long as a body allows, terminal and line controls, bidi
# and astral characters. Each must get a short -32602 that escapes what it quotes.
HOSTILE_TOOL_NAMES = {
    "huge": "purchase_free_bundle" * 3000,
    "controls": "\x1b[2J\r\n\x00purchase_free_bundle\x07",
    "unicode": "p\u00fcrchase_free_bundle\u202e\u2028\U0001f600",
}


def assert_unknown_tool_quoted_safely(error: dict, name: str) -> None:
    """A JSON-RPC error for an unknown tool `name`: -32602, short, every character printable, and
    no more of the name than a typo needs."""
    message = error["message"]
    assert error["code"] == -32602, error
    assert message.startswith("unknown tool: ") and len(message) <= 400, message
    assert message.isprintable(), message
    assert len(name) <= 64 or name[:65] not in message, "more of the name than a typo needs"


def json_answers_of(code: str, cwd) -> list:
    """Run a page's shell snippet with bash (-euo pipefail) and read the JSON documents it printed,
    one after another, as the reader would see them."""
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert done.returncode == 0, done.stderr
    decoder, answers, rest = json.JSONDecoder(), [], done.stdout.strip()
    while rest:
        answer, end = decoder.raw_decode(rest)
        answers.append(answer)
        rest = rest[end:].strip()
    return answers


class StoppedClock:
    """A clock that moves only when a test moves it (`clock.now += seconds`)."""

    def __init__(self, now: float = 1_900_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def own_venv(requirements: Path, venv: Path) -> Path:
    """A virtualenv of its own for a tool whose requirements cannot share .venv's, built from
    `requirements` by the first run that needs it (one at a time across workers) and rebuilt when
    that file changes; its bin directory. `make test` builds it first, with the same stamp."""
    wanted = requirements.read_text()
    stamp = venv / ".installed"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text() != wanted:
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=HANG_SECONDS)
            done = subprocess.run(
                [
                    str(venv / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ]
                + ["-r", str(requirements)],
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert done.returncode == 0, f"installing {requirements.name} failed:\n{done.stderr[-3000:]}"
            stamp.write_text(wanted)
    return venv / "bin"
