"""The dashboard: server-rendered HTML under ``/ui``, no script, no external resources.

(Over 500 lines: the pages are HTML written in Python, with no template engine
to keep the server extra small; each page is one function.)

A person signs in with their API key; it is kept in an HttpOnly, SameSite=Strict
cookie scoped to ``/ui``. Every form that changes something carries a token
derived from the key (and a per-process secret) and is refused without it, and
a cross-origin ``Origin`` header is refused too. The key decides the user
exactly as in the API: an admin chooses a user (the ``user`` parameter, honoured
for admin keys only, every action logged), an ordinary key sees its own data.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime, timedelta, timezone
from html import escape
from typing import Any
from urllib.parse import parse_qs, urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from .._errors import InvalidInput, UnsupportedCapability
from .._port import Capability
from .._records import MemoryHit, MemoryRecord, MemoryUpdate
from ._app import (
    NOT_FOUND,
    ApiError,
    Caller,
    ServerState,
    authorize,
    compute_stats,
    error_response,
    read_body,
    route_of,
    scalar_text,
    select,
)
from ._schema import MemoryOut

__all__ = ["COOKIE", "dashboard_routes"]

COOKIE = "mp_key"
PAGE_SIZE = 20
_CSRF_SECRET = secrets.token_bytes(32)

_FLASH = {
    "deleted": "The memory was deleted.",
    "updated": "The memory was updated.",
    "erased": "Every memory of this user was erased.",
    "in": "Signed in.",
}


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.memoryport
    return state


def csrf_token(secret: str) -> str:
    """The form token for the key ``secret``: an HMAC under a per-process secret."""
    return hmac.new(_CSRF_SECRET, secret.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


# -- HTML -------------------------------------------------------------------------

CSS = """
:root { color-scheme: light dark; --fg: #1b1b1f; --bg: #fbfbfd; --muted: #5d5d6a; --line: #d6d6e0;
        --accent: #2f5bd3; --danger: #b3261e; --card: #ffffff; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e8e8ee; --bg: #131317; --muted: #a4a4b4; --line: #34343f; --accent: #8fb0ff;
          --danger: #ff8a80; --card: #1c1c22; }
}
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--fg); background: var(--bg); }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.skip { position: absolute; left: -9999px; }
.skip:focus { left: 1rem; top: 1rem; background: var(--card); padding: .5rem; }
header { display: flex; flex-wrap: wrap; gap: .5rem 1.25rem; align-items: center; padding: .75rem 1rem;
         border-bottom: 1px solid var(--line); background: var(--card); }
header .brand { font-weight: 700; margin-right: auto; }
nav ul { display: flex; flex-wrap: wrap; gap: .25rem 1rem; list-style: none; margin: 0; padding: 0; }
nav a[aria-current] { font-weight: 700; text-decoration: none; }
main { max-width: 60rem; margin: 0 auto; padding: 1rem; }
h1 { font-size: 1.5rem; margin: .25rem 0 1rem; }
.who { color: var(--muted); font-size: .9rem; }
.badge { display: inline-block; border: 1px solid var(--line); border-radius: 999px; padding: 0 .5rem;
         font-size: .8rem; color: var(--muted); }
form.filters { display: grid; grid-template-columns: repeat(auto-fit, minmax(10rem, 1fr)); gap: .5rem 1rem;
               align-items: end; margin-bottom: 1rem; }
label { display: block; font-size: .85rem; color: var(--muted); }
input, textarea, select, button { font: inherit; color: inherit; }
input, textarea, select { width: 100%; padding: .4rem .5rem; border: 1px solid var(--line); border-radius: .35rem;
                          background: var(--bg); }
textarea { min-height: 7rem; }
button, .button { display: inline-block; padding: .45rem .9rem; border-radius: .35rem; border: 1px solid var(--accent);
                  background: var(--accent); color: #fff; cursor: pointer; text-decoration: none; }
@media (prefers-color-scheme: dark) { button, .button { color: #111; } }
button.secondary { background: transparent; color: var(--accent); }
button.danger { background: var(--danger); border-color: var(--danger); }
ol.memories { list-style: none; padding: 0; margin: 0; display: grid; gap: .75rem; }
article { background: var(--card); border: 1px solid var(--line); border-radius: .5rem; padding: .75rem 1rem; }
article p.text { margin: 0 0 .5rem; white-space: pre-wrap; overflow-wrap: anywhere; }
dl.meta { display: flex; flex-wrap: wrap; gap: .25rem 1rem; margin: 0 0 .5rem; font-size: .85rem; color: var(--muted); }
dl.meta div { display: flex; gap: .3rem; } dl.meta dt::after { content: ":"; } dl.meta dd { margin: 0; }
.actions { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; }
.actions form { margin: 0; }
.pager { display: flex; justify-content: space-between; gap: 1rem; margin: 1rem 0; }
.flash { border-left: 4px solid var(--accent); background: var(--card); padding: .5rem .75rem; margin-bottom: 1rem; }
.error { border-left-color: var(--danger); }
table { border-collapse: collapse; width: 100%; } th, td { text-align: left; padding: .3rem .5rem;
        border-bottom: 1px solid var(--line); }
meter { width: 100%; min-width: 8rem; }
svg.chart { width: 100%; height: auto; max-height: 14rem; }
svg.chart rect.bar { fill: var(--accent); } svg.chart text { fill: var(--muted); font-size: 11px; }
svg.chart line { stroke: var(--line); }
.stack > * + * { margin-top: 1rem; }
@media (max-width: 36rem) { header .brand { width: 100%; } main { padding: .75rem; } }
"""

_SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # with no-referrer, Chromium sends "Origin: null" on form posts
    "Cache-Control": "no-store",
}


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _time(value: datetime | None) -> str:
    return "" if value is None else value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _page(
    title: str,
    body: str,
    *,
    who: Caller | None = None,
    csrf: str = "",
    current: str = "",
    status: int = 200,
    flash: str | None = None,
    error: str | None = None,
) -> HTMLResponse:
    nav = ""
    if who is not None:
        links = [
            ("memories", "Memories", "/ui/"),
            ("stats", "Stats", "/ui/stats"),
            ("erase", "Erase my data", "/ui/erase"),
        ]
        items = "".join(
            f'<li><a href="{_e(_with_user(href, who))}"{" aria-current=page" if key == current else ""}>'
            f"{_e(label)}</a></li>"
            for key, label, href in links
        )
        items += f'<li><a href="{_e(_with_user("/ui/export", who))}" download>Export (JSON lines)</a></li>'
        badge = ' <span class="badge">admin</span>' if who.principal.admin else ""
        nav = (
            f'<nav aria-label="Main"><ul>{items}</ul></nav>'
            f'<span class="who">Memories of <strong>{_e(who.user_id)}</strong>{badge}</span>'
            f'<form method="post" action="/ui/logout"><input type="hidden" name="csrf" value="{_e(csrf)}">'
            '<button class="secondary" type="submit">Sign out</button></form>'
        )
    notes = ""
    if flash:
        notes += f'<p class="flash" role="status">{_e(flash)}</p>'
    if error:
        notes += f'<p class="flash error" role="alert">{_e(error)}</p>'
    html = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)} · memoryport</title>"
        '<link rel="stylesheet" href="/ui/style.css"></head><body>'
        '<a class="skip" href="#main">Skip to content</a>'
        f'<header><span class="brand">memoryport</span>{nav}</header>'
        f'<main id="main" tabindex="-1"><h1>{_e(title)}</h1>{notes}{body}</main></body></html>'
    )
    return HTMLResponse(html, status_code=status, headers=_SECURITY_HEADERS)


def _with_user(href: str, who: Caller | None, **params: str) -> str:
    """``href`` with the acting user kept for admins (ordinary keys never need it)."""
    query = dict(params)
    if who is not None and who.principal.admin:
        query = {"user": who.user_id, **query}
    query = {k: v for k, v in query.items() if v not in ("", None)}
    return f"{href}?{urlencode(query)}" if query else href


def _hidden(who: Caller, csrf: str) -> str:
    user = f'<input type="hidden" name="user" value="{_e(who.user_id)}">' if who.principal.admin else ""
    return f'<input type="hidden" name="csrf" value="{_e(csrf)}">{user}'


# -- who is calling ----------------------------------------------------------------


class _SignIn(Exception):
    """No valid key in the cookie: send the person to the sign-in page."""


async def _form(request: Request) -> dict[str, str]:
    body = await read_body(request)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(422, "invalid_input", "the form is not UTF-8", field="body") from None
    parsed = parse_qs(text, keep_blank_values=True, max_num_fields=50)
    return {k: v[0] for k, v in parsed.items()}


def _same_origin(request: Request) -> None:
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
        raise ApiError(403, "forbidden", "this form was sent from another site")


async def _who(request: Request, form: Mapping[str, str] | None = None) -> tuple[Caller, str]:
    """The caller from the cookie (and the acting user for admins), and the form token."""
    state = _state(request)
    secret = request.cookies.get(COOKIE)
    principal = state.keys.authenticate(secret)
    if principal is None or secret is None:
        raise _SignIn()
    request.state.key_id = principal.key_id
    token = csrf_token(secret)
    if request.method == "POST":
        _same_origin(request)
        if form is None or not hmac.compare_digest(form.get("csrf", ""), token):
            raise ApiError(403, "forbidden", "this form has expired or did not come from this dashboard; reload it")
        named = form.get("user") or None
    else:
        named = request.query_params.get("user") or None
    if principal.admin and named is None:
        raise _ChooseUser(token)
    who = authorize(state, principal, named, method=request.method, route=route_of(request.app, request.scope))
    return who, token


class _ChooseUser(Exception):
    def __init__(self, csrf: str) -> None:
        super().__init__("choose a user")
        self.csrf = csrf


def _dashboard(endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """``endpoint`` with sign-in redirects, the admin's user choice and errors as HTML pages."""

    async def wrapped(request: Request) -> Response:
        try:
            return await endpoint(request)
        except _SignIn:
            return RedirectResponse("/ui/login", status_code=303)
        except _ChooseUser:
            body = (
                '<form method="get" class="filters" action="/ui/">'
                '<div><label for="user">User id</label><input id="user" name="user" required autofocus></div>'
                '<div><button type="submit">Open</button></div></form>'
                "<p>An admin key acts for one user at a time; every action is logged, without content.</p>"
            )
            return _page("Choose a user", body)
        except Exception as exc:
            answer = error_response(exc)
            status = answer.status_code
            try:
                message = json.loads(bytes(answer.body))["error"]["message"]
            except (ValueError, KeyError):  # pragma: no cover - error_response always answers JSON
                message = "something went wrong"
            headers = {k: v for k, v in answer.headers.items() if k.lower() == "retry-after"}
            response = _page(
                "Not possible", "<p><a href=/ui/>Back to the memories</a></p>", status=status, error=message
            )
            response.headers.update(headers)
            return response

    wrapped.__name__ = endpoint.__name__
    return wrapped


# -- pages ---------------------------------------------------------------------------


async def style(request: Request) -> Response:
    return Response(CSS, media_type="text/css", headers={"Cache-Control": "max-age=3600"})


async def login_page(request: Request) -> Response:
    return _login_form()


def _login_form(error: str | None = None, status: int = 200) -> HTMLResponse:
    body = (
        '<form method="post" action="/ui/login" class="stack">'
        '<div><label for="key">API key</label>'
        '<input id="key" name="key" type="password" autocomplete="current-password" required autofocus '
        'placeholder="mpk_..."></div>'
        '<p class="who">The key is kept in a cookie that only this dashboard can read. '
        "Ask whoever runs this server for a key: <code>memoryport keys create --user YOU</code>.</p>"
        '<button type="submit">Sign in</button></form>'
    )
    return _page("Sign in", body, status=status, error=error)


async def login(request: Request) -> Response:
    _same_origin(request)
    form = await _form(request)
    secret = form.get("key", "").strip()
    principal = _state(request).keys.authenticate(secret)
    if principal is None:
        return _login_form("That key is not valid (unknown, revoked or mistyped).", status=401)
    response = RedirectResponse("/ui/?done=in", status_code=303)
    response.set_cookie(
        COOKIE,
        secret,
        httponly=True,
        samesite="strict",
        secure=_state(request).secure_cookies,
        path="/ui",
        max_age=12 * 3600,
    )
    return response


async def logout(request: Request) -> Response:
    form = await _form(request)
    secret = request.cookies.get(COOKIE)
    if secret is not None:
        _same_origin(request)
        if not hmac.compare_digest(form.get("csrf", ""), csrf_token(secret)):
            raise ApiError(403, "forbidden", "this form has expired; reload the page")
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


def _flash(request: Request) -> str | None:
    return _FLASH.get(request.query_params.get("done", ""))


def _card(record: MemoryRecord, who: Caller, csrf: str, hit: MemoryHit | None = None) -> str:
    assert record.id is not None
    meta = [("id", record.id[:12]), ("created", _time(record.created_at))]
    if record.updated_at is not None:
        meta.append(("updated", _time(record.updated_at)))
    if record.expires_at is not None:
        meta.append(("expires", _time(record.expires_at)))
    if record.scope.session_id:
        meta.append(("session", record.scope.session_id))
    if record.scope.agent_id:
        meta.append(("agent", record.scope.agent_id))
    for key, value in sorted(record.metadata.items()):
        meta.append((key, scalar_text(value)))
    if hit is not None:
        meta = [("score", f"{hit.score:.4f}"), ("signal", hit.signal), *meta]
    items = "".join(f"<div><dt>{_e(k)}</dt><dd>{_e(v)}</dd></div>" for k, v in meta)
    href = _with_user(f"/ui/memories/{record.id}", who)
    return (
        f'<li><article aria-label="Memory {_e(record.id[:12])}">'
        f'<p class="text">{_e(record.text)}</p><dl class="meta">{items}</dl>'
        f'<div class="actions"><a class="button secondary" href="{_e(href)}">Edit</a>'
        f'<form method="post" action="/ui/memories/{_e(record.id)}/delete">{_hidden(who, csrf)}'
        f'<button class="danger" type="submit" aria-label="Delete memory {_e(record.id[:12])}">Delete</button></form>'
        "</div></article></li>"
    )


def _filters_form(request: Request, who: Caller) -> str:
    q = request.query_params

    def field(name: str, label: str, placeholder: str = "", kind: str = "text") -> str:
        return (
            f'<div><label for="f-{name}">{_e(label)}</label><input id="f-{name}" name="{name}" type="{kind}" '
            f'value="{_e(q.get(name, ""))}" placeholder="{_e(placeholder)}"></div>'
        )

    user = f'<input type="hidden" name="user" value="{_e(who.user_id)}">' if who.principal.admin else ""
    return (
        f'<form method="get" action="/ui/" class="filters" role="search">{user}'
        + field("q", "Search", "words to look for", "search")
        + field("kind", "Kind", "fact")
        + field("meta", "Metadata", "key=value")
        + field("since", "Since", "7d or 2026-01-31")
        + field("until", "Until", "24h or 2026-02-28")
        + '<div><button type="submit">Apply</button></div></form>'
    )


async def memories(request: Request) -> Response:
    who, csrf = await _who(request)
    state = _state(request)
    q = request.query_params
    scope = who.scope()
    body = _filters_form(request, who)
    query = q.get("q", "").strip()
    pager = ""
    if query:
        filters: dict[str, Any] = {}
        for pair in [q.get("meta", "")] if q.get("meta") else []:
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise ApiError(422, "invalid_input", "metadata filters are written key=value", field="meta")
            filters[key] = _scalar(value)
        if q.get("kind"):
            filters["kind"] = q["kind"]
        hits = await state.memory.search(
            query,
            scope=scope,
            k=50,
            filters=filters or None,
            since=q.get("since") or None,
            until=q.get("until") or None,
        )
        mode = str(getattr(hits, "mode", "") or "")
        body += f'<p class="who" role="status">{len(hits)} best matches (mode: {_e(mode)})</p>'
        cards = "".join(_card(h.record, who, csrf, h) for h in hits)
    else:
        records = await select(state, scope, request)
        page = _page_number(request)
        pages = max(1, -(-len(records) // PAGE_SIZE))
        shown = records[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        body += f'<p class="who" role="status">{_count(len(records))} · page {page} of {pages} · newest first</p>'
        cards = "".join(_card(r, who, csrf) for r in shown)
        keep = {k: q.get(k, "") for k in ("kind", "meta", "since", "until")}
        prev = (
            f'<a href="{_e(_with_user("/ui/", who, **keep, page=str(page - 1)))}" rel="prev">← Newer</a>'
            if page > 1
            else "<span></span>"
        )
        nxt = (
            f'<a href="{_e(_with_user("/ui/", who, **keep, page=str(page + 1)))}" rel="next">Older →</a>'
            if page < pages
            else "<span></span>"
        )
        pager = f'<nav class="pager" aria-label="Pages">{prev}{nxt}</nav>'
    body += f'<ol class="memories">{cards or "<li>No memories match.</li>"}</ol>{pager}'
    return _page("Memories", body, who=who, csrf=csrf, current="memories", flash=_flash(request))


def _count(n: int) -> str:
    return f"{n} memory" if n == 1 else f"{n} memories"


def _scalar(value: str) -> Any:
    if value in ("true", "false", "null"):
        return json.loads(value)
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def _page_number(request: Request) -> int:
    raw = request.query_params.get("page", "1")
    if not raw.isdigit() or not 1 <= int(raw) <= 10**6:
        raise ApiError(422, "invalid_input", "page must be a positive integer", field="page")
    return int(raw)


def _memory_id(request: Request) -> str:
    raw = request.path_params["memory_id"]
    try:
        return _state(request).memory.limits.check_id(raw, "memory_id")
    except InvalidInput as exc:
        raise ApiError(422, "invalid_input", str(exc), field="memory_id") from None


def _edit_form(record: MemoryRecord, who: Caller, csrf: str, backend: str | None, values: Mapping[str, str]) -> str:
    """The edit form; ``backend`` names a backend that cannot update (the form is then disabled)."""
    assert record.id is not None
    text = values.get("text", record.text)
    metadata = values.get("metadata", json.dumps(record.metadata, ensure_ascii=False, indent=1))
    expires = values.get("expires_at", record.expires_at.isoformat() if record.expires_at else "")
    dis = "" if backend is None else " disabled"
    note = (
        ""
        if backend is None
        else f'<p class="flash error">The {_e(backend)} backend cannot update a memory; you can delete it.</p>'
    )
    out = MemoryOut.of(record)
    return (
        f'{note}<dl class="meta"><div><dt>id</dt><dd>{_e(out.id)}</dd></div>'
        f"<div><dt>created</dt><dd>{_e(_time(out.created_at))}</dd></div>"
        + (f"<div><dt>updated</dt><dd>{_e(_time(out.updated_at))}</dd></div>" if out.updated_at else "")
        + "</dl>"
        f'<form method="post" action="/ui/memories/{_e(record.id)}" class="stack">{_hidden(who, csrf)}'
        f'<div><label for="text">Text</label><textarea id="text" name="text" required{dis}>{_e(text)}</textarea></div>'
        f'<div><label for="metadata">Metadata (a JSON object of flat values)</label>'
        f'<textarea id="metadata" name="metadata"{dis}>{_e(metadata)}</textarea></div>'
        f'<div><label for="expires_at">Expires at (ISO 8601, empty for never)</label>'
        f'<input id="expires_at" name="expires_at" value="{_e(expires)}"{dis}></div>'
        f'<div class="actions"><button type="submit"{dis}>Save</button>'
        f'<a href="{_e(_with_user("/ui/", who))}">Cancel</a></div></form>'
        f'<form method="post" action="/ui/memories/{_e(record.id)}/delete" class="stack">{_hidden(who, csrf)}'
        '<button class="danger" type="submit">Delete this memory</button></form>'
    )


def _cannot_update(state: ServerState) -> str | None:
    return None if Capability.UPDATE in state.memory.capabilities else state.memory.backend


async def memory_page(request: Request) -> Response:
    who, csrf = await _who(request)
    state = _state(request)
    record = await state.memory.get(_memory_id(request), scope=who.scope())
    if record is None:
        raise ApiError(404, "not_found", NOT_FOUND)
    form = _edit_form(record, who, csrf, _cannot_update(state), {})
    return _page("Edit a memory", form, who=who, csrf=csrf, flash=_flash(request))


async def save_memory(request: Request) -> Response:
    form = await _form(request)
    who, csrf = await _who(request, form)
    state = _state(request)
    memory_id = _memory_id(request)
    scope = who.scope()
    record = await state.memory.get(memory_id, scope=scope)
    if record is None:
        raise ApiError(404, "not_found", NOT_FOUND)

    def again(message: str) -> Response:
        assert record is not None
        page = _edit_form(record, who, csrf, _cannot_update(state), form)
        return _page("Edit a memory", page, who=who, csrf=csrf, status=422, error=message)

    changes: dict[str, Any] = {}
    if form.get("text", "") != record.text:
        changes["text"] = form.get("text", "")
    try:
        metadata = json.loads(form.get("metadata", "") or "{}")
    except ValueError:
        return again('Metadata must be a JSON object, e.g. {"kind": "fact"}.')
    if not isinstance(metadata, dict):
        return again('Metadata must be a JSON object, e.g. {"kind": "fact"}.')
    if metadata != record.metadata:
        changes["metadata"] = metadata
    expires_raw = form.get("expires_at", "").strip()
    current = record.expires_at.isoformat() if record.expires_at else ""
    if expires_raw != current:
        if expires_raw:
            try:
                expires = datetime.fromisoformat(expires_raw.replace("Z", "+00:00"))
            except ValueError:
                return again("Expires at must be an ISO 8601 time, e.g. 2027-01-31T12:00:00+00:00.")
            if expires.tzinfo is None:
                expires = expires.replace(tzinfo=timezone.utc)
            changes["expires_at"] = expires
        else:
            changes["expires_at"] = None
    if not changes:
        return RedirectResponse(_with_user(f"/ui/memories/{memory_id}", who), status_code=303)
    try:
        done = await state.memory.update([MemoryUpdate(id=memory_id, **changes)], scope=scope)
    except UnsupportedCapability:
        return again("This backend cannot update a memory.")
    except InvalidInput as exc:
        name = exc.field.split(".")[-1].split("[")[0]
        return again(f"Not saved: {name} is not valid ({str(exc).split(': ', 1)[-1]}).")
    if not done:
        raise ApiError(404, "not_found", NOT_FOUND)
    return RedirectResponse(_with_user(f"/ui/memories/{memory_id}", who, done="updated"), status_code=303)


async def delete_memory(request: Request) -> Response:
    form = await _form(request)
    who, _ = await _who(request, form)
    memory = _state(request).memory
    memory_id = _memory_id(request)
    scope = who.scope()
    if await memory.get(memory_id, scope=scope) is None or not await memory.delete([memory_id], scope=scope):
        raise ApiError(404, "not_found", NOT_FOUND)
    return RedirectResponse(_with_user("/ui/", who, done="deleted"), status_code=303)


async def export_download(request: Request) -> Response:
    who, _ = await _who(request)
    records = await _state(request).memory.export(who.scope())

    async def lines() -> Any:
        for record in records:
            yield (MemoryOut.of(record).model_dump_json() + "\n").encode("utf-8")

    name = (
        f"memoryport-{who.user_id}.jsonl"
        if who.user_id.replace("-", "").replace("_", "").isalnum()
        else ("memoryport-export.jsonl")
    )
    return StreamingResponse(
        lines(),
        media_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="{name}"', "Cache-Control": "no-store"},
    )


async def erase_page(request: Request) -> Response:
    who, csrf = await _who(request)
    n = len(await _state(request).memory.export(who.scope()))
    return _page("Erase my data", _erase_form(who, csrf, n), who=who, csrf=csrf, current="erase")


def _erase_form(who: Caller, csrf: str, n: int) -> str:
    return (
        f"<p>This deletes all <strong>{n}</strong> {'memory' if n == 1 else 'memories'} of "
        f"<strong>{_e(who.user_id)}</strong> for good. Download an export first if you want to keep a copy.</p>"
        f'<form method="post" action="/ui/erase" class="stack">{_hidden(who, csrf)}'
        f'<div><label for="confirm">Type the user id <strong>{_e(who.user_id)}</strong> to confirm</label>'
        '<input id="confirm" name="confirm" autocomplete="off" required></div>'
        '<button class="danger" type="submit">Erase everything</button></form>'
    )


async def erase(request: Request) -> Response:
    form = await _form(request)
    who, csrf = await _who(request, form)
    memory = _state(request).memory
    if form.get("confirm", "") != who.user_id:
        n = len(await memory.export(who.scope()))
        return _page(
            "Erase my data",
            _erase_form(who, csrf, n),
            who=who,
            csrf=csrf,
            current="erase",
            status=422,
            error="Nothing was erased: the confirmation did not match the user id.",
        )
    await memory.delete(scope=who.scope())
    return RedirectResponse(_with_user("/ui/", who, done="erased"), status_code=303)


def _chart(days: Mapping[str, int], today: datetime) -> str:
    """Memories added per day over the last 30 days, as an inline SVG bar chart."""
    span = [(today - timedelta(days=i)).date().isoformat() for i in range(29, -1, -1)]
    values = [days.get(d, 0) for d in span]
    top = max(values) or 1
    width, height, pad = 600, 160, 24
    bar = (width - pad) / len(span)
    rects = []
    for i, (day, n) in enumerate(zip(span, values, strict=True)):
        h = (height - 2 * pad) * n / top
        x = pad + i * bar
        rects.append(
            f'<rect class="bar" x="{x + 1:.1f}" y="{height - pad - h:.1f}" width="{bar - 2:.1f}" height="{h:.1f}">'
            f"<title>{_e(day)}: {n}</title></rect>"
        )
    summary = f"Memories added per day, {span[0]} to {span[-1]}: {sum(values)} in all, at most {max(values)} a day."
    return (
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{_e(summary)}">'
        f'<line x1="{pad}" y1="{height - pad}" x2="{width}" y2="{height - pad}"/>'
        + "".join(rects)
        + f'<text x="{pad}" y="{height - 6}">{_e(span[0])}</text>'
        f'<text x="{width}" y="{height - 6}" text-anchor="end">{_e(span[-1])}</text>'
        f'<text x="{pad}" y="14">max {top}/day</text></svg>'
    )


async def stats_page(request: Request) -> Response:
    who, csrf = await _who(request)
    state = _state(request)
    stats = compute_stats(state, who.user_id, await state.memory.export(who.scope()))
    days = {d.day: d.count for d in stats.by_day}
    top = max(stats.by_kind.values(), default=1)
    kinds = "".join(
        f"<tr><th scope=row>{_e(kind or '(no kind)')}</th><td>{n}</td>"
        f'<td><meter min="0" max="{top}" value="{n}" aria-label="{_e(kind or "no kind")}: {n}"></meter></td></tr>'
        for kind, n in sorted(stats.by_kind.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    table = "".join(f"<tr><td>{_e(d.day)}</td><td>{d.count}</td></tr>" for d in reversed(stats.by_day))
    body = (
        f"<p>{_count(stats.total)} · backend {_e(stats.backend)}</p>"
        f"<h2>Added per day (last 30 days)</h2>{_chart(days, datetime.now(timezone.utc))}"
        f"<details><summary>Every day as a table</summary><table><thead><tr><th>Day (UTC)</th><th>Added</th></tr>"
        f"</thead><tbody>{table}</tbody></table></details>"
        f"<h2>By kind</h2><table><thead><tr><th>Kind</th><th>Memories</th><th><span class=skip>Share</span></th>"
        f"</tr></thead><tbody>{kinds or '<tr><td colspan=3>None yet</td></tr>'}</tbody></table>"
    )
    return _page("Stats", body, who=who, csrf=csrf, current="stats")


def dashboard_routes() -> Iterable[Route]:
    """The ``/ui`` routes, for :func:`create_app`."""

    async def home(request: Request) -> Response:
        return RedirectResponse("/ui/", status_code=307)

    return [
        Route("/ui", home, methods=["GET"]),
        Route("/ui/style.css", style, methods=["GET"]),
        Route("/ui/login", login_page, methods=["GET"]),
        Route("/ui/login", _dashboard(login), methods=["POST"]),
        Route("/ui/logout", _dashboard(logout), methods=["POST"]),
        Route("/ui/", _dashboard(memories), methods=["GET"]),
        Route("/ui/stats", _dashboard(stats_page), methods=["GET"]),
        Route("/ui/export", _dashboard(export_download), methods=["GET"]),
        Route("/ui/erase", _dashboard(erase_page), methods=["GET"]),
        Route("/ui/erase", _dashboard(erase), methods=["POST"]),
        Route("/ui/memories/{memory_id}", _dashboard(memory_page), methods=["GET"]),
        Route("/ui/memories/{memory_id}", _dashboard(save_memory), methods=["POST"]),
        Route("/ui/memories/{memory_id}/delete", _dashboard(delete_memory), methods=["POST"]),
    ]
