"""What wraps every answer: the security headers, and the request body read before a refusal.

- **Headers.** Every response carries a Content-Security-Policy (scripts and styles from
  the collector itself only, plus the `<style>` of the timeline SVG, which carries the
  response's nonce; no plug-ins, frames, forms to elsewhere or other origins), and
  `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer`.  The nonce is fresh
  for each page; the live script sends its page's nonce back when it asks for a fragment
  (`X-Nonce`), so a fragment's nonced styles still apply in the page they are put in.
- **The unread body.** An answer given before the request's body was read (a 413 on the
  declared length, a 401, a 404 for a POST) would leave the body in the socket: closing a
  socket with unread data sends a reset, and the client sees a reset instead of the
  answer.  So before such an answer goes out the rest of the body is read and discarded,
  up to `DRAIN_BYTES` and `DRAIN_SECONDS`; beyond that the answer says `Connection: close`.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DRAIN_BYTES = 64 << 20  # read and discard at most this much of a refused body
DRAIN_SECONDS = 10.0
NONCE = re.compile(r"[A-Za-z0-9_-]{22}")


def csp(nonce: str) -> str:
    return (
        "default-src 'none'; script-src 'self'; "
        f"style-src 'self' 'nonce-{nonce}'; img-src 'self'; font-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )


def nonce_of(headers: dict[bytes, bytes]) -> str:
    """This response's nonce: the page's own for a fragment that asked with it, else a fresh one."""
    offered = headers.get(b"x-nonce", b"").decode("latin-1")
    if headers.get(b"x-fragment") == b"1" and NONCE.fullmatch(offered):
        return offered
    return secrets.token_urlsafe(16)


def has_body(headers: dict[bytes, bytes]) -> bool:
    return headers.get(b"content-length", b"0") != b"0" or b"transfer-encoding" in headers


class Guard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        nonce = nonce_of(headers)
        scope.setdefault("state", {})["nonce"] = nonce
        body_done = not has_body(headers)

        async def tracked_receive() -> Message:
            nonlocal body_done
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal body_done
            if message["type"] == "http.response.start":
                answer: list[tuple[bytes, bytes]] = list(message.get("headers", []))
                answer += [
                    (b"content-security-policy", csp(nonce).encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                ]
                if not body_done:
                    body_done = await _drain(receive)
                    if not body_done:
                        answer.append((b"connection", b"close"))
                message = {**message, "headers": answer}
            await send(message)

        await self.app(scope, tracked_receive, guarded_send)


async def _drain(receive: Receive) -> bool:
    """Read the rest of a request's body; True once it has all been read."""
    read = 0
    with anyio.move_on_after(DRAIN_SECONDS):
        while read <= DRAIN_BYTES:
            message: dict[str, Any] = dict(await receive())
            if message["type"] != "http.request":
                return True  # the client went away
            read += len(message.get("body", b""))
            if not message.get("more_body", False):
                return True
    return False
