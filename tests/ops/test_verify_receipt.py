"""ops.verify_receipt's choice of keys for a receipt URL, against a stand-in store: the domain-root
JWKS first, the /api/ one only where a store not yet upgraded lacks the root one."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ops import verify_receipt
from shared.config.keys import KeySet
from shared.purchase.receipt import signatures
from shared.purchase.receipt.document import encode
from shared.seams.public_fetch import PublicFetcher
from tests.support import HANG_SECONDS, ROOT, off_curve, run_module

RECEIPT_PATH = "/api/receipts/rcpt_3356oymxvrlcnfepn66by6fqyy"
ROOT_JWKS, API_JWKS = "/.well-known/jwks.json", "/api/.well-known/jwks.json"


def key_set() -> KeySet:
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return KeySet.load(pem.decode())


KEYS = key_set()
CONTENT = {"receipt_id": "rcpt_3356oymxvrlcnfepn66by6fqyy", "status": "fulfilled", "checks": []}
RECEIPT = encode({**CONTENT, "signature": signatures.sign(CONTENT, KEYS)})
JWKS = json.dumps(KEYS.jwks()).encode()


class _Store(ThreadingHTTPServer):
    pages: dict[str, bytes]
    asked: list[str]


class _Handler(BaseHTTPRequestHandler):
    server: _Store

    def do_GET(self) -> None:
        self.server.asked.append(self.path)
        body = self.server.pages.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def store() -> Iterator[_Store]:
    server = _Store(("127.0.0.1", 0), _Handler)
    server.pages, server.asked = {RECEIPT_PATH: RECEIPT}, []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def verify(store: _Store, capsys) -> tuple[int, str]:
    code = verify_receipt.main([f"http://127.0.0.1:{store.server_port}{RECEIPT_PATH}"])
    return code, capsys.readouterr().out


def test_an_upgraded_store_is_verified_with_its_root_jwks_alone(store, capsys):
    store.pages |= {ROOT_JWKS: JWKS, API_JWKS: JWKS}

    code, out = verify(store, capsys)

    assert (code, out.split(":")[0]) == (0, "VALID"), out
    assert store.asked == [RECEIPT_PATH, ROOT_JWKS]


def test_a_store_not_yet_upgraded_is_verified_with_its_api_jwks(store, capsys):
    store.pages |= {API_JWKS: JWKS}

    code, out = verify(store, capsys)

    assert (code, out.split(":")[0]) == (0, "VALID"), out
    assert store.asked == [RECEIPT_PATH, ROOT_JWKS, API_JWKS]


def test_a_root_path_answering_something_other_than_a_key_set_falls_back_to_the_api_jwks(store, capsys):
    store.pages |= {ROOT_JWKS: b"<!doctype html><p>our home page</p>", API_JWKS: JWKS}

    code, out = verify(store, capsys)

    assert (code, out.split(":")[0]) == (0, "VALID"), out
    assert store.asked == [RECEIPT_PATH, ROOT_JWKS, API_JWKS]


def test_a_root_jwks_without_the_receipts_key_is_a_verdict_not_a_reason_to_look_elsewhere(store, capsys):
    store.pages |= {ROOT_JWKS: json.dumps(key_set().jwks()).encode(), API_JWKS: JWKS}

    code, out = verify(store, capsys)

    assert (code, out.split(":")[0]) == (1, "INVALID"), out
    assert store.asked == [RECEIPT_PATH, ROOT_JWKS]


def test_a_store_with_neither_jwks_is_unreadable_naming_both_urls(store, capsys):
    code, out = verify(store, capsys)

    base = f"http://127.0.0.1:{store.server_port}"
    assert code == 2
    assert out == (
        f"UNREADABLE: cannot fetch {base}{ROOT_JWKS}: HTTP 404; cannot fetch {base}{API_JWKS}: HTTP 404\n"
    )


def _nested(depth: int) -> dict:
    inner: object = "x"
    for _ in range(depth):
        inner = {"a": inner}
    return {**CONTENT, "note": inner}


@pytest.mark.parametrize(
    "receipt, jwks",
    [
        # a forged receipt nested far deeper than any receipt, signed or not
        (encode({**_nested(900), "signature": signatures.sign(CONTENT, KEYS)}), JWKS),
        (b"[" * 5000 + b"]" * 5000, JWKS),
        # a key set whose key for the receipt's kid is off the curve
        (RECEIPT, json.dumps({"keys": [off_curve(k) for k in KEYS.jwks()["keys"]]}).encode()),
        (RECEIPT, json.dumps({"keys": "not a list"}).encode()),
        (RECEIPT, json.dumps({"keys": [{"kid": KEYS.kid, "kty": "EC", "crv": "P-256"}]}).encode()),
        (b"\xff\xfe not even text", JWKS),
        # hostile keys under the receipt's kid: an HMAC key, a number, another curve, two keys
        (RECEIPT, json.dumps({"keys": [{"kid": KEYS.kid, "kty": "oct", "k": "c2VjcmV0"}]}).encode()),
        (RECEIPT, json.dumps({"keys": [{**KEYS.public_keys[0], "x": 12345}]}).encode()),
        (RECEIPT, json.dumps({"keys": [{**KEYS.public_keys[0], "crv": "P-384"}]}).encode()),
        (RECEIPT, json.dumps({"keys": [off_curve(KEYS.public_keys[0]), KEYS.public_keys[0]]}).encode()),
    ],
    ids=[
        "nested-900",
        "arrays-5000",
        "key-off-curve",
        "keys-not-a-list",
        "key-without-coordinates",
        "bytes",
        "hmac-key",
        "number-coordinate",
        "p384-curve",
        "two-keys-one-kid",
    ],
)
def test_any_receipt_or_key_set_gets_one_verdict_line_and_no_traceback(tmp_path, capsys, receipt, jwks):
    (tmp_path / "receipt.json").write_bytes(receipt)
    (tmp_path / "jwks.json").write_bytes(jwks)

    code = verify_receipt.main([str(tmp_path / "receipt.json"), "--jwks", str(tmp_path / "jwks.json")])

    out, err = capsys.readouterr()
    assert code in (1, 2) and len(out.splitlines()) == 1 and err == ""
    assert out.startswith(("INVALID: ", "UNREADABLE: "))


def test_a_host_sending_more_than_a_receipt_is_unreadable_not_a_memory_error(store, capsys):
    store.pages[RECEIPT_PATH] = b"[" * (2 * 1024 * 1024)

    code, out = verify(store, capsys)

    assert code == 2 and out.startswith("UNREADABLE: ") and "larger than" in out
    assert len(out.splitlines()) == 1


def test_a_host_dribbling_its_answer_is_cut_off_at_the_deadline(store, capsys, monkeypatch):
    monkeypatch.setattr(
        verify_receipt, "FETCHER", PublicFetcher(local=True, timeout=1, max_bytes=1024 * 1024)
    )
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def dribble() -> None:
        conn, _ = listener.accept()
        conn.recv(4096)
        with contextlib.suppress(OSError):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
            while not stop.wait(0.05):
                conn.sendall(b"{")
        conn.close()

    threading.Thread(target=dribble, daemon=True).start()
    try:
        code = verify_receipt.main([f"http://127.0.0.1:{listener.getsockname()[1]}{RECEIPT_PATH}"])
    finally:
        stop.set()
        listener.close()

    out = capsys.readouterr().out
    assert code == 2 and out.startswith("UNREADABLE: ") and len(out.splitlines()) == 1


def test_a_terminal_without_unicode_still_gets_its_one_verdict_line(tmp_path):
    """A receipt's text the terminal's encoding lacks is written as an escape, never a traceback."""
    content = {**CONTENT, "receipt_id": "rcpt_\u9886\u6536\u636e"}
    (tmp_path / "receipt.json").write_bytes(encode({**content, "signature": signatures.sign(content, KEYS)}))
    (tmp_path / "jwks.json").write_bytes(JWKS)
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "ops.verify_receipt",
            str(tmp_path / "receipt.json"),
            "--jwks",
            str(tmp_path / "jwks.json"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=HANG_SECONDS,
        check=False,
    )

    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("VALID: receipt rcpt_\\u9886\\u6536\\u636e is signed")


def check_file(tmp_path, body: bytes, *flags: str) -> subprocess.CompletedProcess:
    """`python -m ops.verify_receipt FILE --jwks FILE [flags]` as an auditor runs it."""
    (tmp_path / "receipt.json").write_bytes(body)
    (tmp_path / "jwks.json").write_bytes(JWKS)
    receipt, jwks = str(tmp_path / "receipt.json"), str(tmp_path / "jwks.json")
    return run_module("ops.verify_receipt", receipt, "--jwks", jwks, *flags)


NUMBERED = {**CONTENT, "version": 1}


@pytest.mark.parametrize(
    "copy",
    [
        json.dumps(json.loads(RECEIPT)).encode(),
        # what a client reading every number as a float (the A2A SDK) passes on: 1 became 1.0
        json.dumps(
            json.loads(encode({**NUMBERED, "signature": signatures.sign(NUMBERED, KEYS)}), parse_int=float)
        ).encode(),
    ],
    ids=["one-line", "numbers-as-floats"],
)
def test_a_reformatted_copy_is_invalid_in_one_line_that_points_at_allow_reformatted(tmp_path, copy):
    """The verdict says the content is intact and which flag checks it; the flag then says VALID."""
    strict = check_file(tmp_path, copy)
    lenient = check_file(tmp_path, copy, "--allow-reformatted")

    assert strict.returncode == 1 and strict.stderr == ""
    [verdict] = strict.stdout.splitlines()
    assert verdict.startswith(
        "INVALID: receipt rcpt_3356oymxvrlcnfepn66by6fqyy: the content is signed, but its bytes"
    )
    assert "verifies with --allow-reformatted, which checks the signature over the content" in verdict
    assert lenient.returncode == 0 and lenient.stdout.startswith("VALID: "), lenient.stdout
    assert lenient.stdout.endswith(", its signed content unaltered, its bytes reformatted\n")


def test_the_exact_bytes_read_as_unaltered_with_the_flag_too(tmp_path):
    done = check_file(tmp_path, RECEIPT, "--allow-reformatted")
    assert done.returncode == 0 and done.stdout.endswith(", unaltered\n"), done.stdout


def test_a_changed_content_is_invalid_without_pointing_at_allow_reformatted(tmp_path):
    altered = RECEIPT.replace(b'"fulfilled"', b'"refunded!"')

    done = check_file(tmp_path, altered)

    assert done.returncode == 1
    assert done.stdout == (
        "INVALID: receipt rcpt_3356oymxvrlcnfepn66by6fqyy: "
        "the signature does not match the receipt's content\n"
    )
