"""Who may write and who may read: bearer tokens from the environment, never stored.

Writes (`POST`/`PUT` and srtd's journal route) need the write token when one is set;
reads (the API's GETs and the dashboard) need the read token or the write token when
a read token is set.  A browser cannot send a bearer header on a page load, so
`/login` trades the token for a cookie holding an HMAC of it: the token itself is in
no cookie, page, database row or log line.  Without a write token the collector only
listens on loopback (`check_bind`).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Mapping
from dataclasses import field

from srtd._value import value_class
from srtd.errors import UsageError

WRITE_TOKEN_ENV = "SRTD_COLLECTOR_TOKEN"
READ_TOKEN_ENV = "SRTD_COLLECTOR_READ_TOKEN"
COOKIE = "srtd_collector_session"


@value_class
class Tokens:
    write: str | None = field(default=None, repr=False)
    read: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str], write_env: str = WRITE_TOKEN_ENV, read_env: str = READ_TOKEN_ENV
    ) -> Tokens:
        def token(name: str) -> str | None:
            return (environ.get(name) or "").strip() or None  # a token file's newline is no part of it

        return cls(write=token(write_env), read=token(read_env))

    def may_write(self, authorization: str | None) -> bool:
        return self.write is None or _bearer_is(authorization, self.write)

    def may_read(self, authorization: str | None, cookie: str | None) -> bool:
        if self.read is None:
            return True
        if any(_bearer_is(authorization, t) for t in self._readers()):
            return True
        # as bytes: a str with non-ASCII characters (any header may hold them) cannot be compared
        return cookie is not None and any(
            hmac.compare_digest(cookie.encode(), self.session(t).encode()) for t in self._readers()
        )

    def login(self, offered: str) -> str | None:
        """The session cookie's value for a token typed into `/login`, None for a wrong one."""
        offered = offered.strip()
        for token in self._readers():
            if hmac.compare_digest(offered.encode(), token.encode()):
                return self.session(token)
        return None

    @staticmethod
    def session(token: str) -> str:
        return hmac.new(token.encode(), b"srtd collector dashboard session", hashlib.sha256).hexdigest()

    def _readers(self) -> list[str]:
        return [t for t in (self.read, self.write) if t is not None]


def _bearer_is(authorization: str | None, token: str) -> bool:
    scheme, _, offered = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(offered.strip().encode(), token.encode())


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, tokens: Tokens, write_env: str = WRITE_TOKEN_ENV) -> None:
    """Refuse to listen beyond this machine when anyone could write."""
    if tokens.write is None and not is_loopback(host):
        raise UsageError(
            f"refusing to listen on {host} without a write token: set {write_env} (and {READ_TOKEN_ENV} to "
            "protect reads), or listen on 127.0.0.1"
        )
