"""Calling a function as the Python worker does: the ``context`` argument, one event loop for
every ``async def`` function, and the return value turned into an HTTP answer."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable
from typing import Any

import azure.functions as func

# The host frames every response itself, so these never pass through from a function.
_FRAMING_HEADERS = frozenset({"connection", "content-length", "keep-alive", "transfer-encoding"})


class DevContext(func.Context):
    """The ``context`` argument the Python worker passes to functions that declare one."""

    _thread_local = threading.local()

    def __init__(self, function_name: str, function_directory: str) -> None:
        self._invocation_id = str(uuid.uuid4())
        self._function_name = function_name
        self._function_directory = function_directory

    @property
    def invocation_id(self) -> str:
        return self._invocation_id

    # The SDK's Context annotates this as type[threading.local]; the Python worker, like this,
    # returns an instance.
    @property
    def thread_local_storage(self) -> threading.local:  # type: ignore[override]
        return self._thread_local

    @property
    def function_name(self) -> str:
        return self._function_name

    @property
    def function_directory(self) -> str:
        return self._function_directory

    # The SDK's Context promises a TraceContext and a RetryContext; the dev host has neither.
    @property
    def trace_context(self) -> None:  # type: ignore[override]
        return None

    @property
    def retry_context(self) -> None:  # type: ignore[override]
        return None


class EventLoopThread:
    """One event loop on its own thread that runs every async function."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="devhost-asyncio", daemon=True)
        self._thread.start()

    def run(self, awaitable: Awaitable[Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(_await(awaitable), self._loop).result()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def to_http_answer(result: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """Turn a function's return value into (status, headers, body) as the worker does."""
    if isinstance(result, str):
        result = func.HttpResponse(result)
    if not isinstance(result, func.HttpResponse):
        raise TypeError(f"an HTTP function must return func.HttpResponse, got {type(result).__name__}")
    headers = [
        (name, value) for name, value in result.headers.items() if name.lower() not in _FRAMING_HEADERS
    ]
    if "content-type" not in {name.lower() for name, _ in headers}:
        headers.append(("Content-Type", _content_type(result)))
    return int(result.status_code), headers, result.get_body() or b""


def _content_type(response: func.HttpResponse) -> str:
    if response.mimetype.startswith("text/"):
        return f"{response.mimetype}; charset={response.charset}"
    return response.mimetype
