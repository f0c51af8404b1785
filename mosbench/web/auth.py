"""Who may write (triage): a name from --tokens, proven by `Authorization: Bearer SECRET` (scripts) or by a
session signed in through the sign-in form (people), whose forms then carry a CSRF token. Reading needs
nothing. The session is Flask's signed cookie under a key made at startup (a restart signs everyone out);
the CSRF token is a random value kept in it, compared in constant time: Flask-WTF's CSRFProtect does the
same and brings WTForms with it, for one hidden field."""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

from flask import abort, request, session

from mosbench.web.tokens import Tokens

WHO = "who"
CSRF = "csrf"
CSRF_FIELD = "csrf"  # the forms' hidden field
CSRF_HEADER = "X-CSRF-Token"  # a signed-in page's script's


@dataclass(frozen=True)
class Access:
    """What this server lets anyone write: nothing (read-only), or triage to the names of its tokens."""

    tokens: Tokens | None

    @property
    def writable(self) -> bool:
        return self.tokens is not None

    def signed_in(self) -> str | None:
        who = session.get(WHO)
        return who if isinstance(who, str) and self.tokens is not None and self.tokens.has(who) else None

    def writer(self) -> str:
        """The name a write is made as; before anything else about the request is looked at: 403 on a read-only
        server, 401 without a token (or session), 403 with a wrong one or a form without its CSRF token."""
        if self.tokens is None:
            abort(403, "this server is read-only: it was started without --tokens FILE, or with --read-only")
        header = request.headers.get("Authorization")
        if header is not None:
            scheme, _, secret = header.strip().partition(" ")
            if scheme.lower() != "bearer" or not secret.strip():
                abort(401, "send the token as Authorization: Bearer SECRET")
            name = self.tokens.name_of(secret.strip())
            if name is None:
                abort(403, "that token is not one this server knows")
            return name
        who = self.signed_in()
        if who is None:
            abort(401, "writing needs a token: sign in (/signin), or send Authorization: Bearer SECRET")
        check_csrf()
        return who

    def sign_in(self, secret: str) -> str | None:
        """The name of a secret typed into the sign-in form, now kept in the session; None for a wrong one."""
        name = self.tokens.name_of(secret) if self.tokens is not None else None
        if name is not None:
            session.clear()
            session.permanent = True
            session[WHO] = name
            session[CSRF] = secrets.token_urlsafe(32)  # a new one with the new rights
        return name


def csrf_token() -> str:
    """The session's CSRF token, made on first use (the sign-in form needs one before anyone is signed in)."""
    token = session.get(CSRF)
    if not isinstance(token, str):
        token = session[CSRF] = secrets.token_urlsafe(32)
    return token


def check_csrf() -> None:
    sent = request.form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER) or ""
    kept = session.get(CSRF)
    if not isinstance(kept, str) or not hmac.compare_digest(sent.encode(), kept.encode()):
        abort(403, "the form's CSRF token is missing or stale: reload the page and send it again")
