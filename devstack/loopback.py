"""HTTP clients that call from a chosen loopback address (all of 127.0.0.0/8 is loopback), so
that many buyers on one machine each have a client address, and a rate-limit bucket, of their
own."""

from __future__ import annotations

import requests
from requests.adapters import HTTPAdapter


class _SourceAddressAdapter(HTTPAdapter):
    def __init__(self, source: str):
        self._source = source
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (self._source, 0)
        super().init_poolmanager(*args, **kwargs)


def client_from(source: str) -> requests.Session:
    session = requests.Session()
    adapter = _SourceAddressAdapter(source)
    session.mount("http://", adapter)
    return session
