"""The jarvis HTTP surface on Starlette: `GET /utcp`, `POST /tools/<name>`, JSON errors only.

Each tool has its own URL (`tools.tool_path`): the URL chooses the tool, never the body.
Order of checks, each ending the request with a JSON `{"error": …}` body:

0. served by `jigcmd jarvis`, the connection itself (`http11.py`) comes first: a head it
   cannot parse or past 16 KiB (400), then the bearer token as soon as the head is in (403,
   the connection closed, the body unread), so a wrong token is refused before the `Host`;
1. `Host` must name the bound loopback address (421), and no browser `Origin` (403) — the
   DNS-rebinding defence runs before routing, so even 404s are not served to a browser
   (audited as the actor's when step 0 passed its token, else counted as unauthenticated);
2. unknown path 404, wrong method 405;
3. `Authorization: Bearer <token>` (403), on every route (again, behind `http11.py`);
4. unknown tool (404); the retired `POST /tools/invoke`, whose body chose the tool (410);
5. `Content-Type: application/json` (415), body at most `MAX_BODY_BYTES` (413), strict JSON (400);
6. `{tool?, args}` shape, a `tool` other than the URL's (400), capability (403 `capability
   denied`), arguments (400); then the tool itself (a denial is a result, not an error).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from functools import partial
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from jigcmd.cancel import CancelSignal
from jigcmd.jarvis.auth import (
    AUTHORISED_ACTOR,
    CALLER_CHECK,
    CONNECTION_ANSWER,
    AuthError,
    Credentials,
)
from jigcmd.jarvis.bodyjson import body_json
from jigcmd.jarvis.journalcalls import RunUnrecorded
from jigcmd.jarvis.service import JarvisService
from jigcmd.jarvis.tools import ToolError, decode_invoke, tool_named
from jigcmd.journal.store import JournalUnusable
from jigcmd.server.hostpaths import HostPaths

__all__ = ["MAX_BODY_BYTES", "allowed_hosts", "create_app", "tool_of"]

logger = logging.getLogger("jigcmd.jarvis")

MAX_BODY_BYTES = 64 * 1024
# The one URL of every tool until the body's `tool` chose what it did; now answered 410.
RETIRED_INVOKE_PATH = "/tools/invoke"
_LOOPBACK_NAMES = {"127.0.0.1": ("localhost",), "::1": ("localhost",)}
_FOREIGN_HOST = "Host header does not name this server"
_BROWSER_ORIGIN = "browser Origin refused"
_WEBSOCKET = "WebSocket is not served: jarvis answers HTTP/1.1 requests only"


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """Every `Host` header value that names the bound address (and `localhost` for it)."""
    names = [host, *_LOOPBACK_NAMES.get(host, ())]
    values: set[str] = set()
    for name in names:
        shown = f"[{name}]" if ":" in name else name
        values.add(f"{shown}:{port}")
        if port == 80:
            values.add(shown)
    return frozenset(values)


def error(
    status: int,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    extra: Mapping[str, object] | None = None,
) -> Response:
    """The one shape of every error body."""
    return JSONResponse({"error": message, **(extra or {})}, status_code=status, headers=headers)


class HostOriginGuard:
    """Refuses requests whose Host is not ours, and any request a browser page sent.

    A request whose token the connection checked already (`http11.py`, under `jigcmd
    jarvis`: `auth.AUTHORISED_ACTOR` in its scope) is its actor's call: each refusal is one
    audit row of that actor (`audited`), the tool its URL named. Any other (the application
    served without that connection) has authenticated nowhere yet: its refusal is counted
    (`refused`, with its fixed reason) like any request refused before it authenticated.
    """

    def __init__(
        self,
        app: ASGIApp,
        hosts: Iterable[str],
        refused: Callable[[str], None],
        audited: Callable[[str, str, ToolError], Awaitable[None]],
    ) -> None:
        self.app = app
        self.hosts = frozenset(hosts)
        self.refused = refused
        self.audited = audited

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point."""
        if scope["type"] == "http":
            refusal = self._refusal(scope)
            if refusal is not None:
                actor = scope.get(AUTHORISED_ACTOR)
                if isinstance(actor, str):
                    await self.audited(actor, tool_of(scope["path"]), refusal)
                else:
                    self.refused(refusal.message)
                await error(refusal.status, refusal.message)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> ToolError | None:
        """421 for a Host not ours, 403 for a browser's Origin, 400 for a WebSocket upgrade."""
        headers = [(k.lower(), v) for k, v in scope["headers"]]
        host = [v for k, v in headers if k == b"host"]
        # HTTP/1.0 has no Host header (it came with 1.1, which requires it); a 1.0
        # request without one names no other server, and DNS rebinding needs one.
        hostless = not host and scope.get("http_version") == "1.0"
        if not hostless and (len(host) != 1 or host[0].decode("latin-1").lower() not in self.hosts):
            return ToolError(421, _FOREIGN_HOST)
        if any(k == b"origin" for k, _ in headers):
            return ToolError(403, _BROWSER_ORIGIN)
        upgrades = [
            word.strip().lower() for k, v in headers if k == b"upgrade" for word in v.split(b",")
        ]
        if b"websocket" in upgrades:
            # Served as plain HTTP, the client would wait for frames; refused, it learns.
            return ToolError(400, _WEBSOCKET)
        return None


class JournalLostGuard:
    """A call that found the journal lost (`journalcalls.py`) is answered 503, naming it.

    Nothing is served from or recorded in a journal that is gone; the server is stopping
    already (the service set `must_stop`), and its front says why in one line as it exits.
    """

    def __init__(self, app: ASGIApp, scrub: Callable[[str], str]) -> None:
        self.app = app
        self.scrub = scrub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI entry point."""
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except JournalUnusable as exc:
            if scope["type"] != "http" or started:
                raise
            unrecorded = ""
            extra: dict[str, object] = {}
            if isinstance(exc, RunUnrecorded):
                unrecorded = f"; run {exc.run_id} had started, its end is not recorded"
                extra = {"run_id": exc.run_id}
            message = self.scrub(f"journal {exc.path}: {exc.cause}{unrecorded}; jarvis stops")
            await error(503, message, extra=extra)(scope, receive, send)


def tool_of(path: str) -> str:
    """What an audit row names as the tool of a request to `path`: the tool its URL names
    (`/tools/<name>`; `/tools/invoke` as the retired route's own row does), else the path."""
    prefix = "/tools/"
    if path.startswith(prefix) and path != RETIRED_INVOKE_PATH:
        return path[len(prefix) :]
    return path


def create_app(
    service: JarvisService,
    credentials: Credentials,
    hosts: Iterable[str],
    base_url: str,
    paths: HostPaths | None = None,
    *,
    owns_service: bool = True,
) -> Starlette:
    """The ASGI application; its lifespan owns the service's runs and executor.

    `paths` (the state directory, home, …) are kept out of every error body: the operator's
    stderr may name them, an HTTP client never reads them. Without `owns_service` the caller
    runs the service around the server (`jigcmd jarvis` does: an envelope that cannot start
    is then one line before anything is served, not a failed ASGI lifespan).
    """
    from jigcmd.jarvis.manual import build_manual  # noqa: PLC0415 - keeps app importable alone

    manual = build_manual(base_url, credentials.grants)
    endpoints = _Endpoints(service, credentials, manual, paths or HostPaths.of_host())

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        if not owns_service:
            yield
            return
        async with service.running():
            yield

    app = Starlette(
        routes=[
            Route("/utcp", endpoints.get_manual, methods=["GET"]),
            # Before the tools' route, which would read `invoke` as an unknown tool's name.
            Route(RETIRED_INVOKE_PATH, endpoints.retired, methods=["POST"]),
            Route("/tools/{tool}", endpoints.invoke, methods=["POST"]),
        ],
        exception_handlers={
            HTTPException: endpoints.http_error,
            Exception: endpoints.internal_error,
        },
        lifespan=lifespan,
    )
    # A path with a trailing slash is a 404 like any path not served, never a 307 to another.
    app.router.redirect_slashes = False
    app.add_middleware(
        HostOriginGuard,
        hosts=hosts,
        refused=service.audit_unauthenticated,
        audited=service.audit_refusal,
    )
    # Outermost: a journal lost under any step (the guard's own audit rows included).
    app.add_middleware(JournalLostGuard, scrub=endpoints.scrub)
    return app


class _Endpoints:
    """The two routes and the error handlers, over one service and one set of credentials."""

    def __init__(
        self,
        service: JarvisService,
        credentials: Credentials,
        manual: dict[str, Any],
        paths: HostPaths,
    ) -> None:
        self.service = service
        self.credentials = credentials
        self.manual = manual
        self.scrub = paths.scrub

    def refuse(self, exc: ToolError) -> Response:
        """The error body of a refusal, with no host path in it."""
        extra = {key: self.scrub(value) for key, value in (exc.extra or {}).items()}
        return error(exc.status, self.scrub(exc.message), headers=exc.headers, extra=extra)

    def authorise(self, request: Request) -> str:
        """The actor a request's bearer token names; a 403 `ToolError` (counted) if none."""
        try:
            return self.credentials.check_all(request.headers.getlist("authorization"))
        except AuthError as exc:
            logger.info("refused %s %s: %s", request.method, request.url.path, exc)
            self.service.audit_unauthenticated(str(exc))
            raise ToolError(exc.status, exc.message) from None

    async def get_manual(self, request: Request) -> Response:
        """`GET /utcp`: the UTCP manual of the tools this token may see."""
        try:
            self.authorise(request)
        except ToolError as exc:
            return self.refuse(exc)
        return JSONResponse(self.manual)

    async def retired(self, request: Request) -> Response:
        """`POST /tools/invoke`: gone; a client holding an old manual is told to re-read it.

        Its body chose the tool, so a host exposing one tool exposed them all: answering it
        the old way would keep that hole open for every client not yet updated.
        """
        try:
            actor = self.authorise(request)
        except ToolError as exc:
            return self.refuse(exc)
        gone = ToolError(
            410,
            f"POST {RETIRED_INVOKE_PATH} is retired: each tool has its own URL, "
            "POST /tools/<tool name> (re-read the manual at GET /utcp)",
        )
        await self.service.audit_refusal(actor, RETIRED_INVOKE_PATH, gone)
        return self.refuse(gone)

    async def invoke(self, request: Request) -> Response:
        """`POST /tools/<name>`: one call of that tool, its capability checked first.

        A refusal here is audited here, with whatever argv the body sent; the service audits
        its own.
        """
        name: str = request.path_params["tool"]
        try:
            actor = self.authorise(request)
        except ToolError as exc:
            return self.refuse(exc)
        body: object = None
        try:
            spec = tool_named(name)
            body = await _read_json(request)
            args = decode_invoke(body, spec)
            if spec.capability not in self.credentials.grants:
                raise ToolError(
                    403,
                    f"capability denied: {spec.name} needs {spec.capability}",
                    reason="capability denied",
                    capability=spec.capability,
                )
        except ToolError as exc:
            sent = body.get("args") if isinstance(body, dict) else None
            await self.service.audit_refusal(actor, name, exc, sent)
            return self.refuse(exc)
        handlers: dict[str, Callable[[str, str, Mapping[str, Any]], Awaitable[dict[str, Any]]]]
        handlers = {
            "policy:check": self.service.check,
            "run:create": partial(_while_connected, request, self.service.create),
            "run:read": self.service.get,
        }
        handler = handlers[spec.capability]
        try:
            result: dict[str, Any] = await handler(actor, spec.name, args)
        except ToolError as exc:
            return self.refuse(exc)
        return JSONResponse(result)

    async def http_error(self, request: Request, exc: Exception) -> Response:
        """Starlette's own 404s and 405s, in the one error shape; audited as the actor's call
        when the connection checked its token (`http11.py`)."""
        assert isinstance(exc, HTTPException)
        actor = request.scope.get(AUTHORISED_ACTOR)
        if isinstance(actor, str):
            refusal = ToolError(exc.status_code, exc.detail)
            await self.service.audit_refusal(actor, tool_of(request.url.path), refusal)
        return error(exc.status_code, self.scrub(exc.detail), headers=dict(exc.headers or {}))

    async def internal_error(self, request: Request, exc: Exception) -> Response:
        """Anything unexpected: logged for the operator, a bare 500 for the client."""
        logger.error("internal error on %s: %r", request.url.path, exc)
        return error(500, "internal error")


class _CallerGone(CancelSignal):
    """Set when a call's caller disconnected; asked, it asks a half-closed connection now."""

    def __init__(self, scope: Scope) -> None:
        super().__init__()
        self._scope = scope

    def is_set(self) -> bool:
        """Whether the caller left, a half-closed one's connection asked at this moment
        (`auth.CALLER_CHECK`): between two of its polls the slot may come."""
        check = self._scope.get(CALLER_CHECK)
        if not super().is_set() and check is not None and not check():
            self.set()
        return super().is_set()


async def _while_connected(
    request: Request,
    create: Callable[..., Awaitable[dict[str, Any]]],
    actor: str,
    tool: str,
    args: Mapping[str, Any],
) -> dict[str, Any]:
    """`run.create`, told (`gone`) when its caller disconnects, its body read already.

    A caller gone while its call waits for a slot gets no run (`slotwait.py`); one that
    leaves once the run started leaves it to run to its end, recorded like any other.
    """
    gone = _CallerGone(request.scope)
    receive = request.receive

    async def watch() -> None:
        # With the body read, the next message is the disconnect, whenever it comes.
        while (await receive())["type"] != "http.disconnect":
            pass
        gone.set()

    failure: Exception | None = None
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(watch)
        try:
            result = await create(actor, tool, args, gone)
        except Exception as exc:  # noqa: BLE001 - raised as itself below, not in a task group's ExceptionGroup
            failure = exc
        tasks.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return result


async def _read_json(request: Request) -> object:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise ToolError(415, "Content-Type must be application/json")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise ToolError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                raise ToolError(413, f"request body larger than {MAX_BODY_BYTES} bytes")
    except ClientDisconnect:
        # The client went away, or its body deadline closed the connection, the 408 written
        # (http11.py): the audit row says what was answered, or that nobody was left to.
        answered = request.scope.get(CONNECTION_ANSWER)
        message = answered or "connection closed before the request body was complete"
        logger.info("%s %s: %s", request.method, request.url.path, message)
        raise ToolError(408 if answered else 400, message) from None
    return body_json(bytes(body))
