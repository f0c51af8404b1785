"""The lab's web application: every page and its JSON beside it under /api/, each drawn from one record that
the page's module builds (overview, summaries, graphs, runs); who may triage (auth); the headers and errors
every answer shares. The layer parses and presents only."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flask import Flask, Response, g, jsonify, redirect, render_template, request, send_file, session
from jinja2 import StrictUndefined
from werkzeug.exceptions import BadRequest, HTTPException, MethodNotAllowed, RequestEntityTooLarge
from werkzeug.exceptions import NotFound as NoRoute

from mosbench.errors import UserError
from mosbench.web import auth, graphs, overview, runs, summaries
from mosbench.web.auth import Access
from mosbench.web.lab import STORE_TIMEOUT_S, Lab, NotFound, Unavailable
from mosbench.web.reports import DrawFailed, Drawing, Drawn
from mosbench.web.tokens import Tokens

log = logging.getLogger("mosbench.web")

LARGEST_BODY = 64 * 1024  # a triage is a state, a note and a link
# Pages: scripts only from this server (no inline script, no eval), no frames of them elsewhere. plotly.js
# styles its graphs with <style> elements of its own: inline styles are allowed, inline scripts never.
PAGE_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
               "connect-src 'self'; frame-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
# The HTML report, framed by its run's page: no script at all, its own <style>, its SVG figures.
REPORT_POLICY = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; "
                 "base-uri 'none'; frame-ancestors 'self'")
WRITES = {"api_triage", "form_triage"}


def plotly_js() -> Path:
    """plotly.js as the pinned plotly package ships it (its package_data), served from there: no CDN, no copy."""
    spec = importlib.util.find_spec("plotly")
    found = Path(spec.submodule_search_locations[0]) / "package_data" / "plotly.min.js" if spec and \
        spec.submodule_search_locations else None
    if found is None or not found.is_file():
        raise UserError("the plotly package has no package_data/plotly.min.js: `make native` installs the pinned "
                        "one")
    return found


@dataclass(frozen=True)
class Page:
    """What every page shows beside its record: who is signed in, whether this server takes triage, the form
    token, where the record's JSON is."""

    signed_in: str | None
    writable: bool
    csrf: str | None
    json_url: str | None
    path: str


def create_app(store_url: str, tokens: dict[str, str] | None = None, read_only: bool = False,
               tree: Path | None = None, store_timeout_s: float = STORE_TIMEOUT_S) -> Flask:
    """The application over the store at store_url. tokens: name -> secret (from --tokens FILE); None, or
    read_only, makes a read-only server. tree: the kernel tree for commit order. A page whose record is not
    built within store_timeout_s answers 503."""
    lab = Lab(store_url, tree, store_timeout_s)
    access = Access(Tokens(tokens) if tokens and not read_only else None)
    plotly = plotly_js()
    app = Flask(__name__, static_folder="static", static_url_path="/static")
    app.jinja_options = {**app.jinja_options, "autoescape": True, "undefined": StrictUndefined}
    app.config.update(SECRET_KEY=secrets.token_bytes(32), MAX_CONTENT_LENGTH=LARGEST_BODY,
                      MAX_FORM_MEMORY_SIZE=LARGEST_BODY, SESSION_COOKIE_NAME="mosbench_session",
                      SESSION_COOKIE_HTTPONLY=True, SESSION_COOKIE_SAMESITE="Lax",
                      PERMANENT_SESSION_LIFETIME=dt.timedelta(hours=12))
    app.json.sort_keys = False  # a record's fields in their order
    app.extensions["mosbench.lab"] = lab

    def page(template: str, view: Any, json_url: str | None, status: int = 200) -> tuple[str, int]:
        signed_in = access.signed_in()
        return render_template(template, view=view, page=Page(
            signed_in, access.writable, auth.csrf_token() if signed_in else None, json_url, request.path)), status

    def api_url() -> str:
        return "/api" + request.full_path.rstrip("?")

    def answer(build: Callable[..., Any], *args: Any) -> Any:
        return lab.answer(build, *args)

    def report_page(drawn: Drawn | Drawing) -> Response:
        """A report (compressed as kept, to a client that takes gzip), or while it is drawn a 503 whose page
        says so and reloads itself (a meta refresh: the report's policy allows no script), as a script's
        client reads Retry-After."""
        if isinstance(drawn, Drawn):
            gzipped = bool(request.accept_encodings["gzip"])
            response = Response(drawn.gzipped if gzipped else drawn.page(), mimetype="text/html")
            if gzipped:
                response.headers["Content-Encoding"] = "gzip"
            response.vary.add("Accept-Encoding")
            return response
        response = Response(render_template("drawing.html.j2", view=drawn), 503, mimetype="text/html")
        response.headers["Retry-After"] = str(drawn.reload_s)
        return response

    @app.before_request
    def writer_first() -> None:
        if request.endpoint in WRITES:
            g.who = access.writer()

    @app.after_request
    def headers(response: Response) -> Response:
        framed = g.get("framed", False)
        response.headers["Content-Security-Policy"] = REPORT_POLICY if framed else PAGE_POLICY
        response.headers["X-Frame-Options"] = "SAMEORIGIN" if framed else "DENY"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["Cross-Origin-Opener-Policy"] = "same-origin"
        if request.endpoint not in ("static", "plotly_file"):
            response.headers["Cache-Control"] = "no-store"
        return response

    def error(code: int, message: str) -> Response:
        if request.path.startswith("/api/"):
            response = jsonify({"error": message})
        else:
            try:
                body, _ = page("error.html.j2", {"code": code, "message": message}, None)
            except Exception:  # an error page that cannot be drawn is said in one line all the same
                log.exception("the error page failed")
                body = f"{code}: {message}\n"
            response = Response(body, mimetype="text/html")
        response.status_code = code
        if code == 503:
            response.headers["Retry-After"] = "10"
        if code == 401:
            response.headers["WWW-Authenticate"] = 'Bearer realm="mosbench"'
        return response

    @app.errorhandler(RequestEntityTooLarge)
    def too_large(_e: HTTPException) -> Response:
        return error(413, f"the body is larger than {LARGEST_BODY // 1024} KiB")

    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException) -> Response:
        return error(e.code or 500, said_of(e))

    @app.errorhandler(NotFound)
    def not_found(e: NotFound) -> Response:
        return error(404, str(e))

    @app.errorhandler(Unavailable)
    def unavailable(e: Unavailable) -> Response:
        return error(503, str(e))

    @app.errorhandler(UserError)
    def bad(e: UserError) -> Response:
        return error(400, str(e))

    @app.errorhandler(DrawFailed)
    def not_drawn(e: DrawFailed) -> Response:
        return error(500, str(e))

    @app.errorhandler(Exception)
    def failed(e: Exception) -> Response:
        log.exception("%s %s failed", request.method, request.path)
        return error(500, "the server failed to answer this request (its log says why)")

    # The overview

    @app.get("/")
    def index():
        return page("overview.html.j2", answer(overview.build), "/api/overview")

    @app.get("/api/overview")
    def api_overview():
        return jsonify(answer(overview.build).as_json())

    @app.get("/api/machines")
    def api_machines():
        return jsonify([m.as_json() for m in answer(overview.build).machines])

    # Alerts and triage

    @app.get("/alerts")
    def alerts():
        return page("alerts.html.j2", answer(summaries.alerts, summaries.filters(request.args)), api_url())

    @app.get("/api/alerts")
    def api_alerts():
        return jsonify(answer(summaries.alerts, summaries.filters(request.args)).as_json())

    @app.get("/alerts/<int:summary_id>")
    def summary(summary_id: int):
        return page("summary.html.j2", answer(summaries.one, summary_id), f"/api/alerts/{summary_id}")

    @app.get("/api/alerts/<int:summary_id>")
    def api_summary(summary_id: int):
        return jsonify(answer(summaries.one, summary_id).as_json())

    @app.patch("/api/alerts/<int:summary_id>")
    def api_triage(summary_id: int):
        try:
            body = json.loads(request.get_data(cache=False) or b"")
        except (ValueError, UnicodeDecodeError) as e:
            raise BadRequest(f"the body is not JSON: {e}") from None
        wanted = summaries.asked(body)
        return jsonify(answer(summaries.triage, summary_id, wanted, g.who).as_json())

    @app.post("/alerts/<int:summary_id>/triage")
    def form_triage(summary_id: int):
        wanted = summaries.asked(summaries.form_body(request.form.to_dict()))
        answer(summaries.triage, summary_id, wanted, g.who)
        return redirect(f"/alerts/{summary_id}", 303)

    # Graphs

    @app.get("/graphs")
    def graph():
        return page("graph.html.j2", answer(graphs.series_graph, graphs.asked(request.args)), api_url())

    @app.get("/api/graphs")
    def api_graph():
        return jsonify(answer(graphs.series_graph, graphs.asked(request.args)).as_json())

    @app.get("/graphs/cores")
    def cores():
        return page("cores.html.j2", answer(graphs.cores_graph, *graphs.cores_asked(request.args)), api_url())

    @app.get("/api/graphs/cores")
    def api_cores():
        return jsonify(answer(graphs.cores_graph, *graphs.cores_asked(request.args)).as_json())

    # Runs

    @app.get("/runs/<int:run_id>")
    def run(run_id: int):
        return page("run.html.j2", answer(runs.run_view, run_id), f"/api/runs/{run_id}")

    @app.get("/api/runs/<int:run_id>")
    def api_run(run_id: int):
        return jsonify(answer(runs.run_view, run_id).as_json())

    @app.get("/runs/<int:run_id>/report")
    def run_report(run_id: int):
        g.framed = True  # framed by the run's page, whatever the answer: the report, being drawn, an error
        return report_page(answer(runs.report, (run_id,)))

    @app.get("/compare")
    def compare():
        return page("compare.html.j2", answer(runs.compare_view, *runs.compare_asked(request.args)), api_url())

    @app.get("/api/compare")
    def api_compare():
        return jsonify(answer(runs.compare_view, *runs.compare_asked(request.args)).as_json())

    @app.get("/compare/report")
    def compare_report():
        g.framed = True
        return report_page(answer(runs.report, runs.compare_asked(request.args)))

    # Signing in

    @app.get("/signin")
    def signin():
        if not access.writable:
            raise NotFound("this server is read-only: there is no one to sign in as")
        return page("signin.html.j2", {"next": _local(request.args.get("next")), "wrong": False,
                                       "csrf": auth.csrf_token()}, None)

    @app.post("/signin")
    def signin_post():
        if not access.writable:
            raise NotFound("this server is read-only: there is no one to sign in as")
        auth.check_csrf()
        following = _local(request.form.get("next"))
        if access.sign_in(request.form.get("secret", "")) is None:
            return page("signin.html.j2", {"next": following, "wrong": True, "csrf": auth.csrf_token()}, None, 403)
        return redirect(following, 303)

    @app.post("/signout")
    def signout():
        auth.check_csrf()
        session.clear()
        return redirect("/", 303)

    @app.get("/plotly/plotly.min.js")
    def plotly_file():
        return send_file(plotly, mimetype="text/javascript", max_age=86400, conditional=True)
    return app


def said_of(e: HTTPException) -> str:
    """What an HTTP error says in one line: ours where we raised it, else one for the case in place of
    Werkzeug's default paragraph ("…If you entered the URL manually please check your spelling…")."""
    if e.description and e.description != type(e).description:
        return e.description
    if isinstance(e, NoRoute):
        return f"no page {request.path} on this server (its pages: /, /alerts, /graphs, /runs/ID, /compare)"
    if isinstance(e, MethodNotAllowed):
        taken = ", ".join(sorted(set(e.valid_methods or ()) - {"HEAD", "OPTIONS"}))
        return f"{request.method} is not taken at {request.path} (it takes {taken})"
    return e.name


def _local(target: str | None) -> str:
    """Where to go after signing in: a path of this server only (never another site: //evil, /\\evil)."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")) and "\\" not in target:
        return target
    return "/"
