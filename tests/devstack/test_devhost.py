"""Behaviour of devstack/devhost/, the repo's stand-in for ``func start``.

Most tests talk to one dev host subprocess serving tests/fixtures/devhost_app,
started with DEVHOST_PRESET already in its environment.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from devstack import processes
from devstack.devhost import __main__ as devhost_main
from devstack.devhost.routes import RouteTemplate
from devstack.devhost.server import make_server
from devstack.ports import free_port
from tests.support import HANG_SECONDS, ROOT

pytestmark = pytest.mark.services  # starts processes or servers of its own

REPO = ROOT
FIXTURE_APP = REPO / "tests" / "fixtures" / "devhost_app"
PRESET = "from-environment"
START_TIMEOUT = 20.0


@dataclass
class DevHost:
    process: subprocess.Popen[bytes]
    port: int
    stdout_path: Path
    stderr_path: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.base}/devapi/{path}"

    def stdout(self) -> str:
        return self.stdout_path.read_text()

    def stderr(self) -> str:
        return self.stderr_path.read_text()


def _env(**extra: str) -> dict[str, str]:
    ours = ("DEVHOST_PRESET", "DEVHOST_FROM_SETTINGS", "DEVHOST_FROM_EXAMPLE")
    env = {name: value for name, value in os.environ.items() if name not in ours}
    return {**env, **extra}


def _wait_for_start(host: DevHost) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while "Host started" not in host.stdout():
        if host.process.poll() is not None:
            pytest.fail(f"dev host exited with {host.process.returncode}:\n{host.stderr()}")
        if time.monotonic() > deadline:
            pytest.fail(f"dev host did not start:\n{host.stderr()}")
        time.sleep(0.05)


@contextmanager
def running_devhost(app_dir: Path, logs: Path, env: dict[str, str]) -> Iterator[DevHost]:
    port = free_port()
    stdout_path, stderr_path = logs / "stdout.txt", logs / "stderr.txt"
    command = [sys.executable, "-m", "devstack.devhost", "--app-dir", str(app_dir)]
    with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
        process = processes.start([*command, "--port", str(port)], cwd=REPO, env=env, stdout=out, stderr=err)
    host = DevHost(process, port, stdout_path, stderr_path)
    try:
        _wait_for_start(host)
        yield host
    finally:
        processes.stop(process)


def _wait_for_log(host: DevHost, pattern: str) -> str:
    deadline = time.monotonic() + 5
    while not re.search(pattern, host.stderr()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return host.stderr()


@pytest.fixture(scope="module")
def devhost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevHost]:
    logs = tmp_path_factory.mktemp("devhost")
    with running_devhost(FIXTURE_APP, logs, _env(DEVHOST_PRESET=PRESET)) as host:
        yield host


# --- start-up -----------------------------------------------------------------


def test_lists_functions_then_announces_host_started(devhost: DevHost) -> None:
    lines = devhost.stdout().splitlines()

    assert lines[0] == "Functions:"
    assert f"  item: [GET,DELETE] {devhost.base}/devapi/items/{{id:int}}/{{name?}}" in lines
    assert f"  greet: {devhost.base}/devapi/greet/{{who:alpha}}" in lines
    assert f"  unrouted: [GET] {devhost.base}/devapi/unrouted" in lines
    assert "  nightly: timerTrigger" in lines
    assert lines[-1] == f"Host started on {devhost.base}"


# --- timer triggers through the admin API ---------------------------------------


def test_timer_runs_only_when_asked_through_the_admin_api(devhost: DevHost) -> None:
    assert requests.get(f"{devhost.base}/devapi/timer-runs", timeout=5).json() == {"runs": 0}

    answer = requests.post(f"{devhost.base}/admin/functions/nightly", json={"input": ""}, timeout=5)

    assert answer.status_code == 202
    assert requests.get(f"{devhost.base}/devapi/timer-runs", timeout=5).json() == {"runs": 1}


@pytest.mark.parametrize(
    ("method", "name", "status"),
    [("POST", "no_such_function", 404), ("GET", "nightly", 404), ("POST", "item", 404)],
)
def test_admin_api_runs_only_known_timer_functions(
    devhost: DevHost, method: str, name: str, status: int
) -> None:
    answer = requests.request(method, f"{devhost.base}/admin/functions/{name}", timeout=5)
    assert answer.status_code == status


# --- the admin API refuses what a page on another site could send -------------

MASTER_KEY = f"dev-master-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def keyed_devhost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevHost]:
    """A dev host with a master key and one extra allowed Origin host, as a local settings file
    or the environment would give them."""
    logs = tmp_path_factory.mktemp("keyed-devhost")
    env = _env(STOREFRONT_DEV_MASTER_KEY=MASTER_KEY, STOREFRONT_ALLOWED_ORIGINS="https://tools.example.org")
    with running_devhost(FIXTURE_APP, logs, env) as host:
        yield host


def _timer_runs(host: DevHost) -> int:
    return requests.get(host.url("timer-runs"), timeout=5).json()["runs"]


def _run_nightly(host: DevHost, **request: Any) -> requests.Response:
    """POST /admin/functions/nightly; the dev host answers once the run is over (or refused)."""
    request.setdefault("json", {"input": ""})
    return requests.post(f"{host.base}/admin/functions/nightly", timeout=5, **request)


def _assert_refused(host: DevHost, status: int, code: str, **request: Any) -> None:
    before = _timer_runs(host)

    answer = _run_nightly(host, **request)

    assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)
    assert _timer_runs(host) == before


JSON_BODY = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("request_", "status", "code"),
    [
        pytest.param(
            {"headers": {"Origin": "https://evil.example"}}, 403, "forbidden_origin", id="foreign-origin"
        ),
        pytest.param(
            {"headers": {"Origin": "http://localhost.evil.example"}}, 403, "forbidden_origin", id="look-alike"
        ),
        # A sandboxed frame, a file: or a data: page.
        pytest.param({"headers": {"Origin": "null"}}, 403, "forbidden_origin", id="opaque-origin"),
        # A no-cors fetch or a form: no preflight, so the browser sends it whatever the answer.
        pytest.param(
            {"data": b"{}", "headers": {"Origin": "https://evil.example", "Content-Type": "text/plain"}},
            403,
            "forbidden_origin",
            id="simple-request",
        ),
        pytest.param(
            {"headers": {"Sec-Fetch-Site": "cross-site"}}, 403, "forbidden_origin", id="cross-site-no-origin"
        ),
        # What a form posts, from a browser that may leave out Origin.
        *(
            pytest.param(
                {"data": b'{"input": ""}', "headers": {"Content-Type": kind}},
                415,
                "unsupported_media_type",
                id=kind.split(";")[0],
            )
            for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x")
        ),
        *(
            pytest.param({"data": body, "headers": JSON_BODY}, 400, "invalid_request", id=name)
            for name, body in {
                "not-json": b"not json",
                "array": b'["input"]',
                "not-utf8": b"\xff{}",
                "cut-short": b'{"input": "',
                "nested-too-deep": b"[" * 100_000,
            }.items()
        ),
    ],
)
def test_a_refused_admin_request_says_why_in_json_and_the_timer_does_not_run(
    devhost: DevHost, request_: dict[str, Any], status: int, code: str
) -> None:
    _assert_refused(devhost, status, code, **request_)


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="no-origin"),
        pytest.param({"Origin": "http://localhost:3000"}, id="localhost-page"),
        pytest.param({"Origin": "http://127.0.0.1:7071", "Sec-Fetch-Site": "same-origin"}, id="same-origin"),
        pytest.param({"Origin": "http://[::1]:8080"}, id="ipv6-loopback-page"),
        pytest.param({"x-functions-key": "anything"}, id="key-when-none-is-set"),
    ],
)
def test_a_local_page_or_a_client_without_origin_runs_the_timer(
    devhost: DevHost, headers: dict[str, str]
) -> None:
    before = _timer_runs(devhost)

    answer = _run_nightly(devhost, headers=headers)

    assert answer.status_code == 202
    assert _timer_runs(devhost) == before + 1


@pytest.mark.parametrize(
    "credentials",
    [
        pytest.param({}, id="no-key"),
        pytest.param({"headers": {"x-functions-key": "wrong"}}, id="wrong-header"),
        pytest.param({"headers": {"x-functions-key": MASTER_KEY[:-1]}}, id="key-prefix"),
        pytest.param({"params": {"code": "wrong"}}, id="wrong-code"),
        pytest.param({"headers": {"x-functions-key": "k\u00e9y"}}, id="non-ascii-key"),
    ],
)
def test_with_a_master_key_set_a_call_without_it_is_401_and_the_timer_does_not_run(
    keyed_devhost: DevHost, credentials: dict[str, dict[str, str]]
) -> None:
    _assert_refused(keyed_devhost, 401, "unauthorized", **credentials)


@pytest.mark.parametrize(
    "credentials",
    [
        pytest.param({"headers": {"x-functions-key": MASTER_KEY}}, id="header"),
        pytest.param({"params": {"code": MASTER_KEY}}, id="code-parameter"),
    ],
)
def test_with_a_master_key_set_the_key_runs_the_timer_and_stays_out_of_the_log(
    keyed_devhost: DevHost, credentials: dict[str, dict[str, str]]
) -> None:
    before = _timer_runs(keyed_devhost)

    answer = _run_nightly(keyed_devhost, **credentials)

    assert answer.status_code == 202
    assert _timer_runs(keyed_devhost) == before + 1
    assert MASTER_KEY not in _wait_for_log(keyed_devhost, r"POST /admin/functions/nightly 202 ")


def test_an_origin_the_settings_allow_may_call_with_the_key_and_a_foreign_one_may_not(
    keyed_devhost: DevHost,
) -> None:
    key = {"x-functions-key": MASTER_KEY}
    before = _timer_runs(keyed_devhost)

    allowed = _run_nightly(keyed_devhost, headers={**key, "Origin": "https://tools.example.org"})
    foreign = _run_nightly(keyed_devhost, headers={**key, "Origin": "https://evil.example"})

    assert (allowed.status_code, foreign.status_code) == (202, 403)
    assert _timer_runs(keyed_devhost) == before + 1


def test_http_functions_do_not_ask_for_the_master_key(keyed_devhost: DevHost) -> None:
    # Like func start: only the admin API checks a key locally.
    assert requests.get(keyed_devhost.url("items/42"), timeout=5).status_code == 200


# --- routing ------------------------------------------------------------------


def test_serves_routes_under_the_host_json_route_prefix(devhost: DevHost) -> None:
    assert requests.get(devhost.url("items/latest")).status_code == 200
    assert requests.get(f"{devhost.base}/api/items/latest").status_code == 404


def test_route_and_query_params_reach_the_function(devhost: DevHost) -> None:
    response = requests.get(devhost.url("items/42/widget?colour=red&colour=blue&flag"))

    assert response.status_code == 200
    seen = response.json()
    assert seen["route_params"] == {"id": "42", "name": "widget"}
    assert seen["params"] == {"colour": "red", "flag": ""}
    assert seen["url"] == devhost.url("items/42/widget?colour=red&colour=blue&flag")


def test_optional_route_param_may_be_left_out(devhost: DevHost) -> None:
    response = requests.get(devhost.url("items/42"))

    assert response.json()["route_params"] == {"id": "42"}


def test_literal_segments_match_case_insensitively(devhost: DevHost) -> None:
    response = requests.get(f"{devhost.base}/DevApi/ITEMS/42")

    assert response.status_code == 200
    assert response.json()["function"] == "item"


def test_route_constraints_reject_segments_that_do_not_fit(devhost: DevHost) -> None:
    assert requests.get(devhost.url("items/forty-two")).status_code == 404
    assert requests.get(devhost.url("greet/abc123")).status_code == 404


def test_routes_are_tried_by_function_name_not_by_registration(devhost: DevHost) -> None:
    assert requests.get(devhost.url("things/special")).json()["function"] == "special_thing"
    assert requests.get(devhost.url("things/plain")).json()["function"] == "thing"


def test_a_parameter_route_whose_name_sorts_first_takes_a_literal_path_as_on_azure(devhost: DevHost) -> None:
    # The Functions host sorts functions by name and matches routes in that order, with no
    # template precedence (azure-functions-host#9876); func start and Azure agree with this.
    assert requests.get(devhost.url("order/fixed")).json()["function"] == "a_parameter"
    assert requests.get(devhost.url("order/other")).json()["function"] == "a_parameter"


def test_function_names_are_compared_ignoring_case(devhost: DevHost) -> None:
    assert requests.get(devhost.url("case/fixed")).json()["function"] == "a_case"
    assert requests.get(devhost.url("case/other")).json()["function"] == "B_case"


def test_a_catch_all_named_to_sort_last_serves_every_path_and_method_the_others_do_not(
    devhost: DevHost,
) -> None:
    assert requests.get(devhost.url("misc/known")).json()["function"] == "misc_known"
    for method in ("POST", "PUT", "DELETE"):
        fallback = requests.request(method, devhost.url("misc/known"))
        assert (fallback.status_code, fallback.json()["function"]) == (404, "zz_misc_fallback")
    deep = requests.get(devhost.url("misc/a/b"))
    assert deep.json() == {"function": "zz_misc_fallback", "route_params": {"rest": "a/b"}}


def test_catch_all_param_takes_the_decoded_rest_of_the_path(devhost: DevHost) -> None:
    response = requests.get(devhost.url("files/docs/a%20b/c%2Fd.txt"))

    assert response.json()["route_params"] == {"path": "docs/a b/c%2Fd.txt"}


def test_route_defaults_to_function_name_and_context_is_passed(devhost: DevHost) -> None:
    response = requests.get(devhost.url("unrouted"))

    assert response.json() == {"function_name": "unrouted"}


def test_unknown_path_answers_404(devhost: DevHost) -> None:
    response = requests.get(devhost.url("no/such/route"))

    assert response.status_code == 404
    assert response.content == b""


def test_method_not_listed_by_the_trigger_answers_404(devhost: DevHost) -> None:
    assert requests.post(devhost.url("items/42")).status_code == 404
    assert requests.put(devhost.url("headers")).status_code == 404


def test_listed_get_and_delete_reach_the_function(devhost: DevHost) -> None:
    assert requests.get(devhost.url("items/42")).json()["method"] == "GET"
    assert requests.delete(devhost.url("items/42")).json()["method"] == "DELETE"


# --- requests -----------------------------------------------------------------


def _get_headers_seen(connection: http.client.HTTPConnection, **headers: str) -> dict[str, str]:
    connection.request("GET", "/devapi/headers", headers=headers)
    response = connection.getresponse()
    assert response.status == 200
    return json.loads(response.read())


def test_forwarded_for_gets_peer_appended_after_client_value(devhost: DevHost) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", devhost.port, timeout=10)
    connection.connect()
    peer_port = connection.sock.getsockname()[1]

    seen = _get_headers_seen(connection, **{"X-Forwarded-For": "203.0.113.7"})

    assert seen["x-forwarded-for"] == f"203.0.113.7, 127.0.0.1:{peer_port}"
    connection.close()


def test_forwarded_for_is_just_the_peer_when_client_sends_none(devhost: DevHost) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", devhost.port, timeout=10)
    connection.connect()
    peer_port = connection.sock.getsockname()[1]

    assert _get_headers_seen(connection)["x-forwarded-for"] == f"127.0.0.1:{peer_port}"
    connection.close()


def test_keep_alive_connection_serves_several_requests(devhost: DevHost) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", devhost.port, timeout=10)

    first = _get_headers_seen(connection)["x-forwarded-for"]
    second = _get_headers_seen(connection)["x-forwarded-for"]

    assert first == second  # same peer port: the connection was reused
    connection.close()


def test_chunked_request_body_reaches_the_function(devhost: DevHost) -> None:
    chunks = (part for part in (b"first,", b"second,", b"third"))

    response = requests.post(devhost.url("teapot"), data=chunks)

    assert response.content == b"first,second,third"


def test_body_over_100_mb_answers_413(devhost: DevHost) -> None:
    request = (
        "POST /devapi/teapot HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{devhost.port}\r\n"
        f"Content-Length: {100 * 1024 * 1024 + 1}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", devhost.port), timeout=10) as sock:
        sock.sendall(request.encode())
        status_line = sock.makefile("rb").readline()

    assert status_line.split()[1] == b"413"


def test_a_non_ascii_digit_content_length_is_refused_not_dropped(devhost: DevHost) -> None:
    request = (
        f"POST /devapi/teapot HTTP/1.1\r\nHost: 127.0.0.1:{devhost.port}\r\nContent-Length: \u00b2\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", devhost.port), timeout=10) as sock:
        sock.sendall(request.encode())
        status_line = sock.makefile("rb").readline()

    assert status_line.split()[1] == b"400"


def test_a_malformed_request_line_is_logged_without_its_text_or_the_peer(devhost: DevHost) -> None:
    secret = "s3cr3t" + "t" * 60
    with socket.create_connection(("127.0.0.1", devhost.port), timeout=10) as sock:
        sock.sendall(f"GET /devapi/download/{secret} extra HTTP/1.1\r\n\r\n".encode())
        status_line = sock.makefile("rb").readline()

    log = _wait_for_log(devhost, r"request refused by the HTTP layer \(400\)")

    assert status_line.split()[1] == b"400"  # "Bad request syntax", quoting the whole line
    assert secret not in log and "s3cr3t" not in log
    assert "127.0.0.1 -" not in log


def test_long_path_segments_such_as_tokens_are_cut_short_in_the_log(devhost: DevHost) -> None:
    secret = "t" * 120
    requests.get(devhost.url(f"no-such-route/{secret}"), timeout=5)

    log = _wait_for_log(devhost, r"no-such-route/tttttttt…")

    assert secret not in log


def test_control_characters_in_the_method_and_path_are_escaped_in_the_log(devhost: DevHost) -> None:
    request = b"G\x1b[2KET /devapi/no-such-route/\x1b[31m\x00\x9bforged HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", devhost.port), timeout=10) as sock:
        sock.sendall(request)
        status_line = sock.makefile("rb").readline()

    log = _wait_for_log(devhost, r"forged 404 ")

    assert status_line.split()[1] == b"404"
    assert r"G\x1b[2KET /devapi/no-such-route/\x1b[31m\x00\x9bforged 404 " in log
    assert not any(char in log for char in "\x1b\x00\x9b")


def test_requests_are_served_in_parallel(devhost: DevHost) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda _: requests.get(devhost.url("rendezvous"), timeout=60), range(4)))

    assert [(a.status_code, a.text) for a in answers] == [(200, "met")] * 4


# --- responses ----------------------------------------------------------------


def test_async_function_is_awaited(devhost: DevHost) -> None:
    response = requests.get(devhost.url("greet/World"))

    assert response.status_code == 200
    assert response.text == "hello World"
    assert response.headers["Content-Type"] == "text/plain; charset=utf-8"


def test_response_status_headers_and_body_pass_through(devhost: DevHost) -> None:
    response = requests.post(devhost.url("teapot"), data=b"\x00binary\xff")

    assert response.status_code == 418
    assert response.headers["X-Teapot"] == "short and stout"
    assert response.headers["Set-Cookie"] == "a=1"
    assert response.headers["Content-Type"] == "application/octet-stream"
    assert response.headers["Content-Length"] == "8"
    assert response.content == b"\x00binary\xff"


def test_raising_function_answers_500_and_logs_its_traceback(devhost: DevHost) -> None:
    response = requests.get(devhost.url("boom"))

    assert response.status_code == 500
    assert response.content == b""
    assert "RuntimeError: boom went the function" in devhost.stderr()


def test_each_request_is_logged_without_query_string(devhost: DevHost) -> None:
    requests.get(devhost.url("items/7?secret=hunter2"))

    log = _wait_for_log(devhost, r"GET /devapi/items/7 200 ")
    assert re.search(r"GET /devapi/items/7 200 \d+\.\dms", log)
    assert "hunter2" not in log


# --- settings -----------------------------------------------------------------


def test_local_settings_are_loaded_but_do_not_override_the_environment(
    devhost: DevHost,
) -> None:
    seen = requests.get(devhost.url("settings")).json()

    assert seen["DEVHOST_FROM_SETTINGS"] == "from-local-settings"
    assert seen["DEVHOST_PRESET"] == PRESET


def _copy_app(target: Path) -> Path:
    target.mkdir()
    for name in ("function_app.py", "host.json"):
        shutil.copy(FIXTURE_APP / name, target / name)
    return target


def test_settings_fall_back_to_the_example_file(tmp_path: Path) -> None:
    app_dir = _copy_app(tmp_path / "app")
    example = {"Values": {"DEVHOST_FROM_EXAMPLE": "from-example"}}
    (app_dir / "local.settings.json.example").write_text(json.dumps(example))

    with running_devhost(app_dir, tmp_path, _env()) as host:
        seen = requests.get(host.url("settings")).json()

    assert seen["DEVHOST_FROM_EXAMPLE"] == "from-example"
    assert seen["DEVHOST_FROM_SETTINGS"] is None


# --- lifecycle and in-process use ---------------------------------------------


def test_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    with running_devhost(FIXTURE_APP, tmp_path, _env()) as host:
        host.process.terminate()
        returncode = host.process.wait(timeout=HANG_SECONDS)

    assert returncode == 0


def test_a_stop_that_comes_right_after_the_banner_still_stops_cleanly(tmp_path, monkeypatch, capsys):
    """SIGTERM (as KeyboardInterrupt) landing between the banner and serving, as under load."""

    class StoppedAtStart:
        names: list[str] = []

        def start(self) -> None:
            raise KeyboardInterrupt

        def stop(self) -> None:
            pass

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setitem(sys.modules, "function_app", None)
    monkeypatch.setattr(devhost_main, "scheduled_timers", lambda server, which: StoppedAtStart())
    monkeypatch.setattr(devhost_main.signal, "signal", lambda *args: None)  # keep pytest's handlers
    monkeypatch.chdir(tmp_path)

    try:
        code = devhost_main.main(["--app-dir", str(_copy_app(tmp_path / "app")), "--port", "0"])
    except KeyboardInterrupt:  # the host would die of the signal (exit -2) instead of stopping
        pytest.fail("the stop escaped main")

    assert code == 0
    assert "Host started" in capsys.readouterr().out


def test_make_server_on_port_zero_serves_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setitem(sys.modules, "function_app", None)
    server = make_server(_copy_app(tmp_path / "app"), "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        response = requests.get(f"http://127.0.0.1:{port}/devapi/greet/inprocess")
    finally:
        server.shutdown()
        server.server_close()

    assert port != 0
    assert response.text == "hello inprocess"
    assert [f.name for f in server.app.background] == ["nightly"]


# --- route templates ----------------------------------------------------------

GUID = "6ea502d9-fc29-4a23-8a75-d8319c1fb952"  # fixed: test ids must not change between collections


@pytest.mark.parametrize(
    ("template", "path", "expected"),
    [
        ("api/items", "/API/Items", {}),
        ("api/items", "/api/items/", {}),
        ("api/items", "/api/items/extra", None),
        ("api/items/{id}", "/api/items/Abc", {"id": "Abc"}),
        ("api/items/{id?}", "/api/items", {}),
        ("api/items/{id:int}", "/api/items/-7", {"id": "-7"}),
        ("api/items/{id:int}", "/api/items/2147483648", None),
        ("api/items/{id:alpha}", "/api/items/abc1", None),
        ("api/orders/{id:guid}", f"/api/orders/{GUID}", {"id": GUID}),
        ("api/orders/{id:guid}", "/api/orders/not-a-guid", None),
        ("api/orders/{id:minlength(3)}", "/api/orders/x", {"id": "x"}),
        ("api/files/{*rest}", "/api/files/a/b/c", {"rest": "a/b/c"}),
        ("api/files/{*rest}", "/api/files", {}),
        ("api/files/{name}.{ext}", "/api/files/report.v2.pdf", {"name": "report.v2", "ext": "pdf"}),
        ("", "/", {}),
    ],
)
def test_route_template_matching(template: str, path: str, expected: dict[str, str] | None) -> None:
    assert RouteTemplate.parse(template).match(path) == expected
