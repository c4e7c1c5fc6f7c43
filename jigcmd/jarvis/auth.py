"""Bearer-token authentication, capability grants and the token fingerprint used as audit actor.

The raw token is held only inside `Credentials` (whose repr hides it) and compared by digest
in constant time; everything that leaves this module (actor names, errors) is derived from
its SHA-256.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping, Sequence

__all__ = [
    "AUTHORISED_ACTOR",
    "CALLER_CHECK",
    "CAPABILITIES",
    "CONNECTION_ANSWER",
    "MIN_TOKEN_BYTES",
    "AuthError",
    "ConfigError",
    "Credentials",
    "fingerprint",
    "load_credentials",
    "parse_capabilities",
]

CAPABILITIES = ("policy:check", "run:create", "run:read")
# Shorter is guessable; the README's recipe makes 32 (16 random bytes in hex).
MIN_TOKEN_BYTES = 16
TOKEN_ENV = "JARVIS_BEARER_TOKEN"  # noqa: S105 - the variable's name, not a secret
CAPABILITIES_ENV = "JARVIS_UTCP_CAPABILITIES"
# The fingerprint's fixed tag. Never taken from the token: which of its characters are a
# public prefix and which are secret cannot be told (a `secrets.token_urlsafe` token starts
# with a letter-led run before an `_` one time in eleven, all of it secret).
_TAG = "jarvis"
# The ASGI scope key under which the connection (`http11.py`), having checked a request's
# token before the application runs, leaves the actor it names: the application's own
# refusals before its routes (`app.HostOriginGuard`) are then the actor's, not anonymous.
AUTHORISED_ACTOR = "jigcmd.jarvis.actor"
# The ASGI scope key under which the connection leaves the error it answered a request with
# itself (the body deadline's 408): the application's audit row then says what was answered.
CONNECTION_ANSWER = "jigcmd.jarvis.connection_answer"
# The ASGI scope key of a half-closed connection's check, asked now, that its client is still
# there (`halfclose.py`): a call asks it as its slot comes, not only at the poll.
CALLER_CHECK = "jigcmd.jarvis.caller_check"
_SCHEME = "bearer"


class ConfigError(ValueError):
    """Raised when the server's token or capability configuration is unusable."""


class AuthError(Exception):
    """Raised when a request's Authorization header does not carry the server's token."""

    def __init__(self, reason: str, status: int = 403) -> None:
        """`reason` is one of a fixed set of words (the audit counts by it); `status` the
        HTTP status the refusal is answered with."""
        super().__init__(reason)
        self.status = status

    @property
    def message(self) -> str:
        """The words of its error body: `forbidden: <reason>` for a 403, else the reason."""
        return f"forbidden: {self}" if self.status == 403 else str(self)


def fingerprint(token: str) -> str:
    """`tok_jarvis_<first 4 hex of sha256(token)>`: nothing of the token itself."""
    return f"tok_{_TAG}_{hashlib.sha256(token.encode('utf-8')).hexdigest()[:4]}"


def parse_capabilities(value: str | None) -> frozenset[str]:
    """A comma list of grants, every entry a known one; only unset is the full owner grant."""
    if value is None:
        return frozenset(CAPABILITIES)
    names = [part.strip() for part in value.split(",")]
    # A set value that names nothing is most likely a template whose variable was empty
    # (`"${CAPS},"`): read as "no list" it would grant every tool, so it fails the start;
    # so does an empty entry among names (`"${A},${B}"` with one of the two empty).
    if not any(names):
        raise ConfigError(
            f"{CAPABILITIES_ENV} is set to {value!r}, which names no capability; name the "
            f"grants ({', '.join(CAPABILITIES)}), or unset it for the full owner grant"
        )
    if "" in names:
        raise ConfigError(
            f"{CAPABILITIES_ENV} is set to {value!r}, whose entry {names.index('') + 1} is "
            f"empty; name one capability per entry ({', '.join(CAPABILITIES)})"
        )
    unknown = sorted(set(names) - set(CAPABILITIES))
    if unknown:
        raise ConfigError(
            f"{CAPABILITIES_ENV}: unknown capability {unknown[0]!r} "
            f"(known: {', '.join(CAPABILITIES)})"
        )
    return frozenset(names)


class Credentials:
    """The server's one token (as a digest) and the grants that come with it."""

    __slots__ = ("_digest", "actor", "grants")

    def __init__(self, token: str, grants: frozenset[str]) -> None:
        _check_token(token)
        self._digest = hashlib.sha256(token.encode("utf-8")).digest()
        self.actor = fingerprint(token)
        self.grants = grants

    def __repr__(self) -> str:
        return f"Credentials(actor={self.actor!r}, grants={sorted(self.grants)!r})"

    def check_all(self, authorization: Sequence[str]) -> str:
        """The actor for a request's `Authorization` header values: exactly one, and valid.

        Two are refused (400) rather than one of them taken: which one a proxy, a client
        library or another server would read first is anybody's guess.
        """
        if len(authorization) > 1:
            raise AuthError("more than one Authorization header", status=400)
        return self.check(authorization[0] if authorization else None)

    def check(self, authorization: str | None) -> str:
        """The actor for a valid `Authorization` header; raises `AuthError` otherwise."""
        if authorization is None:
            raise AuthError("missing Authorization header")
        scheme, _, presented = authorization.strip().partition(" ")
        if scheme.lower() != _SCHEME:
            raise AuthError("Authorization is not a Bearer token")
        presented = presented.strip()
        if not presented:
            raise AuthError("empty Bearer token")
        # Digests have a fixed length, so the comparison time says nothing about the token.
        digest = hashlib.sha256(presented.encode("utf-8", "surrogateescape")).digest()
        if not hmac.compare_digest(digest, self._digest):
            raise AuthError("wrong Bearer token")
        return self.actor


def _check_token(token: str) -> None:
    """Refuse a token no client could present, or one too short to be a secret.

    The messages never show the token, nor any character of it.
    """
    if any(c.isspace() for c in token):
        raise ConfigError(f"{TOKEN_ENV} must be a token without whitespace")
    if not (token.isascii() and token.isprintable()):
        # Headers are read as latin-1 bytes: a UTF-8 token would never compare equal.
        raise ConfigError(
            f"{TOKEN_ENV} holds a character that is not printable ASCII, which no client can "
            "send in an Authorization header; use letters, digits and punctuation"
        )
    if len(token) < MIN_TOKEN_BYTES:
        raise ConfigError(
            f"{TOKEN_ENV} is too short: jarvis needs a token of at least {MIN_TOKEN_BYTES} "
            "bytes (head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n' makes one of 32)"
        )


def load_credentials(environ: Mapping[str, str]) -> Credentials:
    """Credentials from the server's environment; refuses to go on without a usable token."""
    token = environ.get(TOKEN_ENV)
    if token is None:
        raise ConfigError(f"{TOKEN_ENV} is not set; jarvis refuses to start without a token")
    if not token.strip():
        raise ConfigError(f"{TOKEN_ENV} is empty; jarvis refuses to start without a token")
    return Credentials(token, parse_capabilities(environ.get(CAPABILITIES_ENV)))
