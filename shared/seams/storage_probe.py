"""Whether Table, Blob and the contact queue answer with the app's credentials, for
`GET /api/health`: one cheap call per store (a point read that finds nothing, a container's
properties), and for the queue the contact backlog (its depth and the age of its oldest message,
two calls a shard), and which bundles have no file (one existence check a bundle), run side by
side and bounded by the storage timeout. Its result is reused for a moment, so a flood of health
checks stays a trickle of storage calls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for

from azure.core.credentials import TokenCredential
from azure.core.exceptions import AzureError
from azure.data.tables import TableClient
from azure.storage.blob import ContainerClient

from shared.config.errors import StorageOutage
from shared.seams.contact_queue import Backlog
from shared.seams.storage import STORAGE_SCOPE, check

REUSE_SECONDS = 2.0
# A row no purchase writes: reading it costs one call and finds nothing.
PROBE_PARTITION, PROBE_ROW = "health-probe", "health-probe"


class StorageProbe:
    def __init__(
        self,
        table: TableClient,
        container: ContainerClient,
        timeout: float,
        credential: TokenCredential | None = None,
        clock: Callable[[], float] = time.monotonic,
        backlog: Callable[[], Backlog] | None = None,
        missing_bundles: Callable[..., list[str]] | None = None,
    ):
        self._table, self._container, self._timeout = table, container, timeout
        self._backlog_of = backlog
        self._backlog: Backlog | None = None
        self._missing_of = missing_bundles
        self._missing: list[str] = []
        self._found: list[str] = []  # what the last bundle check to finish found, even a late one
        self._credential, self._clock = credential, clock
        self._lock = threading.Lock()
        self._checked_at: float | None = None
        self._problems: list[str] = []
        # One call in flight per kind (token, table, blob): a store that hangs past the deadline
        # keeps its call running until the client's own timeout, and probes meanwhile report it
        # again instead of queueing more calls behind it.
        self._pool = ThreadPoolExecutor(max_workers=5, thread_name_prefix="storage-probe")
        self._pending: dict[str, Future] = {}

    def problems(self) -> list[str]:
        """What is wrong with storage now; empty when both stores answer. One probe runs at a
        time, at most once per `REUSE_SECONDS`; callers that come while it runs get the last
        result at once (the very first callers wait for the first)."""
        if not self._lock.acquire(blocking=self._checked_at is None):
            return list(self._problems)
        try:
            now = self._clock()
            if self._checked_at is None or now - self._checked_at >= REUSE_SECONDS:
                self._problems = self._probe()
                self._checked_at = self._clock()
            return list(self._problems)
        finally:
            self._lock.release()

    def backlog(self) -> Backlog | None:
        """The contact backlog as the last probe found it; None when it could not be read."""
        return self._backlog

    def missing_bundles(self) -> list[str]:
        """The bundles whose file the last probe did not find; empty when it could not look."""
        return list(self._missing)

    def _read_missing(self, **options: object) -> None:
        """Look for the bundle files for `check`, which words a failure as it does for Blob. Only
        a probe that saw this call answer in time takes what it found (`_probe`)."""
        assert self._missing_of is not None
        try:
            self._found = self._missing_of(**options)
        except StorageOutage as exc:
            raise _azure_error(exc) from None

    def _read_backlog(self, **_: object) -> None:
        """Read the backlog for `check`, which words a failure from the storage error itself
        (refused the identity, answered 5xx, unreachable), as it does for Table and Blob."""
        if self._backlog_of is None:
            return
        try:
            self._backlog = self._backlog_of()
        except StorageOutage as exc:
            self._backlog = None
            raise _azure_error(exc) from None

    def _probe(self) -> list[str]:
        if self._credential is not None:
            problem = self._token_problem()
            if problem:
                self._missing = []
                return [problem]
        identity = self._credential is not None
        calls = {
            "table storage": lambda **kw: self._table.get_entity(PROBE_PARTITION, PROBE_ROW, **kw),
            "blob storage": self._container.get_container_properties,
        }
        if self._backlog_of is not None:
            calls["queue storage"] = self._read_backlog
        if self._missing_of is not None:
            calls["bundle files"] = self._read_missing
        futures = {what: self._submit(what, check, what, call, identity) for what, call in calls.items()}
        wait_for(futures.values(), timeout=self._timeout)
        problems = []
        for what, future in futures.items():
            if not future.done():
                problems.append(f"{what} did not answer within {self._timeout:g} s")
            elif future.exception() is not None:
                problems.append(f"{what} could not be probed ({type(future.exception()).__name__})")
            elif future.result():
                problems.append(future.result())
        if not self._answered(futures.get("queue storage")):
            self._backlog = None  # a backlog this probe could not read is not shown as current
        if self._answered(futures.get("bundle files")):
            self._missing = list(self._found)
        else:
            self._missing = []  # unknown, not missing: an outage reads as the outage it is
            if not self._answered(futures["blob storage"]):  # one Blob problem, said once
                problems = [p for p in problems if not p.startswith("bundle files")]
        return problems

    @staticmethod
    def _answered(future: Future | None) -> bool:
        return future is None or (future.done() and future.exception() is None and not future.result())

    def _token_problem(self) -> str | None:
        if self._credential is None:
            return None
        future = self._submit("token", self._credential.get_token, STORAGE_SCOPE)
        try:
            future.result(timeout=self._timeout)
        except TimeoutError:
            return f"the app's identity gave no storage token within {self._timeout:g} s"
        except Exception as exc:  # whatever the identity endpoint did, health answers 503, not 500
            return f"the app's identity could not get a storage token ({type(exc).__name__})"
        return None

    def _submit(self, kind: str, call: Callable[..., object], *args: object) -> Future:
        """The call of this kind still running from an earlier probe, or a new one."""
        running = self._pending.get(kind)
        if running is not None and not running.done():
            return running
        self._pending[kind] = self._pool.submit(call, *args)
        return self._pending[kind]


def _azure_error(exc: StorageOutage) -> AzureError:
    """The storage error behind an outage, for `check` to word as it words the SDK's own."""
    cause = exc.__cause__
    return cause if isinstance(cause, AzureError) else AzureError(str(exc))
