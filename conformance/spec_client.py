#!/usr/bin/env python3
"""Independent conformance client for mailproof.

Written only from the interface contract (shared/spec/email-testing-api-v5.md) and
the command-line contract of `mailproof`; it knows nothing of the implementation.

Usage:
    python3 conformance/spec_client.py [--strict] [PATH_TO_MAILPROOF]
The binary comes from argv[1], else env MAILPROOF_BIN, else <repo>/target/debug/mailproof.

The script starts `mailproof serve` on free loopback ports with a temporary data dir,
adds accounts through `mailproof accounts add`, runs the cases and stops the server.
Output: one line per case, `ok   name` or `FAIL name: why` (and `skip name: why` for
a case this machine cannot run, not counted), then `conformance: N passed, M failed`.
Exit status is 1 when any case failed. Standard library only (an aiosmtpd helper is run with
whichever local python3 can import aiosmtpd, for SMTPAuthenticationError). Set CONFORMANCE_KEEP=1
to keep the temporary data dir and server logs.
"""

import base64
import contextlib
import datetime
import http.client
import json
import os
import re
import secrets
import select
import shutil
import signal
import smtplib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from email.message import EmailMessage

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HIGH_RATE = "100000"  # per-minute limit for every account but the rate-limit one
INBOX_DOMAIN = "inbox.example"
BOGUS_CLIENT = "no-such-client-zz9"
BOGUS_TEST = "no-such-test-zz9"
HTML = "<html><head><style>p { color: red; }</style></head><body><p>Hello conformance</p></body></html>"


# ----------------------------------------------------------------------------------------
# Reporting


class Fail(Exception):
    """A case's expectation did not hold."""


class Skip(Exception):
    """A case cannot run (a prerequisite failed or is missing on this machine)."""


def require(cond, msg):
    if not cond:
        raise Fail(msg)


def need(value, why):
    if value is None or value is False:
        raise Skip(why)
    return value


class Report:
    def __init__(self):
        self.passed = 0
        self.failed = []
        self.skipped = []

    @contextlib.contextmanager
    def case(self, name):
        try:
            yield
        except Skip as e:
            self.skipped.append(name)
            print(f"skip {name}: {e}", flush=True)
        except Fail as e:
            self.failed.append(name)
            print(f"FAIL {name}: {e}", flush=True)
        except Exception as e:  # an unexpected shape usually surfaces as KeyError/TypeError
            self.failed.append(name)
            print(f"FAIL {name}: unexpected {type(e).__name__}: {e}", flush=True)
        else:
            self.passed += 1
            print(f"ok   {name}", flush=True)

    def summary(self):
        return f"conformance: {self.passed} passed, {len(self.failed)} failed"


# ----------------------------------------------------------------------------------------
# HTTP


class Resp:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    def brief(self):
        text = self.body[:300].decode("utf-8", "replace")
        return f"HTTP {self.status} {text!r}"


def http_call(host, port, method, path, data=None, headers=None, timeout=20):
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=data, headers=headers or {})
        resp = conn.getresponse()
        return Resp(resp.status, resp.headers, resp.read())
    finally:
        conn.close()


def fetch_url(url, auth=None):
    """GET an absolute URL (screenshot links), optionally with Basic credentials."""
    u = urllib.parse.urlsplit(url)
    path = u.path + (f"?{u.query}" if u.query else "")
    headers = {"Authorization": basic(*auth)} if auth else {}
    return http_call(u.hostname, u.port or 80, "GET", path, headers=headers)


def basic(user, password):
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return f"Basic {token}"


_DEFAULT = object()


class Api:
    """One set of credentials against the service; paths are given without the version."""

    def __init__(self, port, auth=None, authorization=None, version="v5"):
        self.port = port
        self.auth = auth
        self.authorization = authorization or (basic(*auth) if auth else None)
        self.version = version

    def request(self, method, path, body=_DEFAULT, raw=None, accept="application/json",
                content_type=_DEFAULT, headers=None):
        hdrs = {}
        if accept is not None:
            hdrs["Accept"] = accept
        if self.authorization:
            hdrs["Authorization"] = self.authorization
        data = None
        if raw is not None:
            data = raw.encode() if isinstance(raw, str) else raw
        elif body is not _DEFAULT:
            data = json.dumps(body).encode()
        if data is not None:
            ctype = "application/json" if content_type is _DEFAULT else content_type
            if ctype:
                hdrs["Content-Type"] = ctype
        hdrs.update(headers or {})
        return http_call("127.0.0.1", self.port, method, path, data, hdrs)

    def _v(self, path, version):
        return f"/{version or self.version}{path}"

    def get(self, path, version=None, **kw):
        return self.request("GET", self._v(path, version), **kw)

    def post(self, path, body=_DEFAULT, version=None, **kw):
        return self.request("POST", self._v(path, version), body=body, **kw)

    def put(self, path, body=_DEFAULT, version=None, **kw):
        return self.request("PUT", self._v(path, version), body=body, **kw)

    def delete(self, path, version=None, **kw):
        return self.request("DELETE", self._v(path, version), **kw)


def q(path, params):
    """Append a standard URL-encoded query string (spaces as %20)."""
    return path + "?" + urllib.parse.urlencode(params, quote_via=urllib.parse.quote)


def qp(s):
    return urllib.parse.quote(s, safe="")


# ----------------------------------------------------------------------------------------
# Shape helpers


def is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def is_str_list(x):
    return isinstance(x, list) and all(isinstance(i, str) for i in x)


def ok_json(resp, kind=dict):
    require(200 <= resp.status < 300, f"expected success, got {resp.brief()}")
    require(isinstance(resp.json, kind), f"expected JSON {kind.__name__}, got {resp.brief()}")
    return resp.json


def require_success(resp):
    j = ok_json(resp)
    require(j.get("success") is True, f"expected {{success: true}}, got {j}")


def expect_error(resp, *names):
    """Error format of spec 7.1; returns the error name."""
    require(resp.status >= 400, f"expected error {'/'.join(names) or ''}, got {resp.brief()}")
    j = resp.json
    require(isinstance(j, dict) and isinstance(j.get("error"), dict),
            f"error body is not {{error: {{name, message}}}}: {resp.brief()}")
    err = j["error"]
    require(isinstance(err.get("name"), str) and err["name"],
            f"error.name missing or not a string: {resp.brief()}")
    require(isinstance(err.get("message"), str) and err["message"].strip(),
            f"error.message missing or empty: {resp.brief()}")
    if names:
        require(err["name"] in names,
                f"expected {'/'.join(names)}, got {err['name']} (HTTP {resp.status}: {err['message']})")
    return err["name"]


def error_name(resp):
    j = resp.json
    if resp.status >= 400 and isinstance(j, dict) and isinstance(j.get("error"), dict):
        return j["error"].get("name")
    return None


def ids_of(entries):
    return [e["id"] for e in entries]


def check_list_entry(e):
    require(isinstance(e, dict), f"list entry is not an object: {e!r}")
    require(isinstance(e.get("id"), str) and e["id"], f"entry.id not a string: {e}")
    require(is_int(e.get("date")), f"entry.date not an integer: {e}")
    require(e.get("type") in ("email-test", "spam-test"), f"entry.type invalid: {e}")
    require(isinstance(e.get("headers"), dict), f"entry.headers not an object: {e}")
    require(all(isinstance(v, str) for v in e["headers"].values()), f"entry.headers values not strings: {e}")


def get_list(api, path, params=None):
    resp = api.get(q(path, params) if params else path)
    entries = ok_json(resp, list)
    for e in entries:
        check_list_entry(e)
    return entries


def check_spam_entry(e):
    require(isinstance(e, dict), f"spam result entry not an object: {e!r}")
    require(isinstance(e.get("client"), str), f"spam entry.client not a string: {e}")
    require(e.get("type") in ("b2b", "b2c"), f"spam entry.type not b2b/b2c: {e}")
    require("spam" in e, f"spam entry has no `spam` field: {e}")
    v = e["spam"]
    require(v is None or v == "" or (is_int(v) and v in (1, 0, -1)), f"spam entry.spam invalid: {e}")
    require(isinstance(e.get("details"), str), f"spam entry.details not a string: {e}")


def check_client_shape(cid, c):
    require(isinstance(c, dict), f"client {cid} not an object")
    require(c.get("id") == cid, f"client key {cid} but id {c.get('id')!r}")
    for f in ("client", "os"):
        require(isinstance(c.get(f), str), f"client {cid}.{f} not a string: {c}")
    require(c.get("category") in ("Application", "Mobile", "Web"), f"client {cid}.category invalid: {c}")
    if "browser" in c:
        require(isinstance(c["browser"], str), f"client {cid}.browser not a string")
    for f in ("rotate", "image_blocking", "free", "default"):
        if f in c:
            require(isinstance(c[f], bool), f"client {cid}.{f} not a boolean: {c[f]!r}")


def email_body(subject="Conformance test", html=HTML, **fields):
    body = {"subject": subject, "html": html}
    body.update(fields)
    return body


def create_email(api, **fields):
    return ok_json(api.post("/email/tests", email_body(**fields)))["id"]


def create_spam(api, **fields):
    body = {"subject": "Conformance spam test", "html": HTML}
    body.update(fields)
    return ok_json(api.post("/spam/tests", body))


def email_test_endpoints(tid, cid):
    """Every call of 4.2 taking a test id; DELETE last."""
    base = f"/email/tests/{qp(tid)}"
    return [
        ("GET", base, _DEFAULT),
        ("GET", f"{base}/results", _DEFAULT),
        ("GET", f"{base}/results/{qp(cid)}", _DEFAULT),
        ("PUT", f"{base}/results/reprocess", {"clients": [cid]}),
        ("GET", f"{base}/content", _DEFAULT),
        ("GET", f"{base}/content/inlinecss", _DEFAULT),
        ("GET", f"{base}/content/textonly", _DEFAULT),
        ("GET", f"{base}/spam/results", _DEFAULT),
        ("GET", f"{base}/spam/seedlist", _DEFAULT),
        ("DELETE", base, _DEFAULT),
    ]


def spam_test_endpoints(tid):
    base = f"/spam/tests/{qp(tid)}"
    return [("GET", base, _DEFAULT), ("GET", f"{base}/seedlist", _DEFAULT), ("DELETE", base, _DEFAULT)]


def call(api, method, path, body=_DEFAULT):
    return api.request(method, f"/{api.version}{path}", body=body)


# ----------------------------------------------------------------------------------------
# Server and accounts


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StartError(Exception):
    pass


class Server:
    def __init__(self, binary, workdir):
        self.binary = binary
        self.workdir = workdir
        self.data_dir = os.path.join(workdir, "data")
        self.http_port = free_port()
        self.smtp_port = free_port()
        self.public_url = f"http://127.0.0.1:{self.http_port}"
        self.api_key = "boot-" + secrets.token_hex(8)
        self.password = "pw-" + secrets.token_hex(8)
        self.proc = None

    def _tail(self, name, n=4000):
        try:
            with open(os.path.join(self.workdir, name), "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def start(self, timeout=60):
        env = dict(os.environ, MAILPROOF_API_KEY=self.api_key, MAILPROOF_PASSWORD=self.password)
        # Operator configuration, not API: admit the SMTP helper's loopback address only.
        config = os.path.join(self.workdir, "mailproof.toml")
        with open(config, "w") as f:
            f.write(f'[fetch]\nallow = ["{SMTP_HELPER_HOST}/32"]\n')
        cmd = [self.binary, "serve", "--data-dir", self.data_dir, "--config", config,
               "--http", f"127.0.0.1:{self.http_port}", "--smtp", f"127.0.0.1:{self.smtp_port}",
               "--public-url", self.public_url, "--inbox-domain", INBOX_DOMAIN]
        with open(os.path.join(self.workdir, "stdout.log"), "wb") as out, \
                open(os.path.join(self.workdir, "stderr.log"), "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, stdin=subprocess.DEVNULL,
                                         cwd=REPO_ROOT)
        deadline = time.monotonic() + timeout
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise StartError(f"mailproof serve exited with status {rc} before /healthz answered.\n"
                                 f"--- stderr ---\n{self._tail('stderr.log')}\n--- stdout ---\n{self._tail('stdout.log')}")
            try:
                if http_call("127.0.0.1", self.http_port, "GET", "/healthz", timeout=2).status == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise StartError(f"/healthz did not answer 200 within {timeout} s.\n"
                                 f"--- stderr ---\n{self._tail('stderr.log')}\n--- stdout ---\n{self._tail('stdout.log')}")
            time.sleep(0.2)

    def add_account(self, plan, *extra):
        key = f"{plan}-{secrets.token_hex(6)}"
        password = "pw-" + secrets.token_hex(8)
        cmd = [self.binary, "accounts", "add", "--data-dir", self.data_dir, "--api-key", key,
               "--password", password, "--plan", plan, *extra]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=REPO_ROOT)
        if res.returncode != 0:
            raise Fail(f"`{' '.join(cmd)}` failed ({res.returncode}): {res.stderr.strip() or res.stdout.strip()}")
        return Api(self.http_port, auth=(key, password))

    def stop(self):
        """SIGTERM, then wait; returns the exit status or None if it had to be killed."""
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


class Ctx:
    """Shared state: server, accounts, client catalogue, ids created along the way."""

    def __init__(self, server):
        self.server = server
        port = server.http_port
        self.boot = Api(port, auth=(server.api_key, server.password))
        self.sandbox = Api(port, auth=("sandbox", "sandbox"))
        self.anon = Api(port)
        self.catalogue = {}
        self.default_ids = []
        self.accounts = {}
        self.ids = {}

    def __getattr__(self, name):  # ctx.ent, ctx.std, ... -> account Api or Skip
        accounts = self.__dict__.get("accounts", {})
        if name in accounts:
            return need(accounts[name], f"account `{name}` could not be created")
        raise AttributeError(name)

    # client picks from the catalogue
    def profiles(self):
        """Listed ids that are not aliases (an alias entry names its profile in `alias_of`)."""
        return sorted(cid for cid, c in self.catalogue.items() if not c.get("alias_of"))

    def pick(self, pred=lambda c: True, exclude=()):
        for cid in self.profiles():
            c = self.catalogue[cid]
            if cid not in exclude and pred(c):
                return cid
        return None

    @property
    def c1(self):
        return need(self.pick(lambda c: c.get("free") is True) or self.pick(), "empty client catalogue")

    @property
    def c2(self):
        return need(self.pick(exclude=(self.c1,)), "fewer than two clients")

    @property
    def nonfree(self):
        return need(self.pick(lambda c: not c.get("free")), "no client without `free`")

    @property
    def free_ids(self):
        return {cid for cid, c in self.catalogue.items() if c.get("free") is True}


def setup_accounts(ctx, r):
    s = ctx.server
    restricted = ctx.profiles()[:2]
    ctx.restricted_ids = restricted
    plans = {
        "ent": ("enterprise", "--rate-limit", HIGH_RATE),
        "intruder": ("enterprise", "--rate-limit", HIGH_RATE),
        "std": ("standard", "--rate-limit", HIGH_RATE),
        "free": ("free", "--rate-limit", HIGH_RATE),
        "res": ("reseller", "--monthly-test-limit", "2", "--rate-limit", HIGH_RATE),
        "restricted": ("standard", "--clients", ",".join(restricted), "--rate-limit", HIGH_RATE),
        "rl": ("standard", "--rate-limit", "5"),
        "lister": ("enterprise", "--rate-limit", HIGH_RATE),
        "defaults": ("standard", "--rate-limit", HIGH_RATE),
        "inbox": ("enterprise", "--auto-inbox", "inbox" + secrets.token_hex(3), "--rate-limit", HIGH_RATE),
    }
    for name, (plan, *extra) in plans.items():
        ctx.accounts[name] = None
        with r.case(f"setup.account_{name}_{plan}"):
            if name == "restricted":
                need(len(restricted) == 2, "fewer than two clients in the catalogue")
            api = s.add_account(plan, *extra)
            if name != "rl":  # keep the rate-limit account's budget untouched
                require_success(api.get("/auth"))
            ctx.accounts[name] = api
            if name == "inbox":
                ctx.inbox_local = extra[1]


# ----------------------------------------------------------------------------------------
# Area: authentication (4.1, 5)


def check_auth(ctx, r):
    port = ctx.server.http_port
    with r.case("auth.get_auth_success"):
        require_success(ctx.boot.get("/auth"))
    with r.case("auth.analytics_auth_success"):
        require_success(ctx.boot.get("/analytics/analytics_auth"))
    with r.case("auth.v5.0.1_auth_success"):
        require_success(ctx.boot.get("/auth", version="v5.0.1"))
    with r.case("auth.sandbox_credentials"):
        require_success(ctx.sandbox.get("/auth"))
        require_success(ctx.sandbox.get("/analytics/analytics_auth"))
    with r.case("auth.without_accept_header"):
        require_success(ctx.boot.get("/auth", accept=None))
    with r.case("auth.json_content_type"):
        ctype = ctx.boot.get("/auth").headers.get("Content-Type", "")
        require("json" in ctype.lower(), f"Content-Type of a JSON body is {ctype!r}")
    bad = {
        "wrong_password": Api(port, auth=(ctx.server.api_key, "wrong")),
        "unknown_key": Api(port, auth=("no-such-key", ctx.server.password)),
        "no_credentials": ctx.anon,
        "malformed_basic": Api(port, authorization="Basic !!!not-base64!!!"),
        "basic_without_colon": Api(port, authorization="Basic " + base64.b64encode(b"sandbox").decode()),
        "bearer_scheme": Api(port, authorization="Bearer sandbox"),
        "sandbox_wrong_password": Api(port, auth=("sandbox", "nope")),
        "empty_credentials": Api(port, auth=("", "")),
    }
    for label, api in bad.items():
        with r.case(f"errors.AccessDenied.{label}"):
            expect_error(api.get("/auth"), "AccessDenied")
    with r.case("errors.AccessDenied.analytics_auth"):
        expect_error(bad["wrong_password"].get("/analytics/analytics_auth"), "AccessDenied")
    with r.case("errors.AccessDenied.key_with_other_accounts_password"):
        ent = ctx.ent
        expect_error(Api(port, auth=(ctx.server.api_key, ent.auth[1])).get("/auth"), "AccessDenied")
    with r.case("errors.AccessDenied.every_area"):
        for path in ("/email/tests", "/email/clients", "/email/clients/default", "/spam/clients",
                     "/spam/tests", "/spam/seedlist", "/tests", f"/email/tests/{BOGUS_TEST}"):
            expect_error(bad["wrong_password"].get(path), "AccessDenied")
        expect_error(bad["wrong_password"].post("/email/tests", email_body()), "AccessDenied")
    with r.case("errors.error_content_type_json"):
        ctype = bad["wrong_password"].get("/auth").headers.get("Content-Type", "")
        require("json" in ctype.lower(), f"Content-Type of an error body is {ctype!r}")


# ----------------------------------------------------------------------------------------
# Area: versions, content negotiation, methods, parsing errors


def check_versions(ctx, r):
    for v in ("v4", "v6", "v5.0.2", "v5.1", "v3"):
        with r.case(f"errors.WrongVersion.{v}"):
            expect_error(ctx.ent.request("GET", f"/{v}/auth"), "WrongVersion")
    with r.case("errors.WrongVersion.email_tests"):
        expect_error(ctx.ent.request("GET", "/v4/email/tests"), "WrongVersion")
        expect_error(ctx.ent.request("POST", "/v6/email/tests", body=email_body()), "WrongVersion")


def check_accept(ctx, r):
    for accept in ("text/html", "application/xml", "image/png"):
        with r.case(f"errors.NoAccept.{accept}"):
            expect_error(ctx.ent.get("/auth", accept=accept), "NoAccept")
    with r.case("errors.NoAccept.on_post"):
        expect_error(ctx.ent.post("/email/tests", email_body(clients=[ctx.c1]), accept="text/plain"), "NoAccept")
    with r.case("errors.NoAccept.json_with_q0"):
        expect_error(ctx.ent.get("/auth", accept="application/json;q=0"), "NoAccept")
    for accept in ("*/*", "application/*", "text/html, application/json;q=0.5", "APPLICATION/JSON",
                   "application/json; charset=utf-8"):
        with r.case(f"accept.allowed[{accept}]"):
            require_success(ctx.ent.get("/auth", accept=accept))


def check_not_found(ctx, r):
    for path in ("/v5/nothing-here", "/v5/email/nothing", "/v5/spam/nothing/at/all", "/v5/email/clients/x/y"):
        with r.case(f"errors.NotFound[{path}]"):
            expect_error(ctx.ent.request("GET", path), "NotFound")
    with r.case("errors.NotFound_or_WrongVersion.no_version_segment"):
        expect_error(ctx.ent.request("GET", "/nothing-here"), "NotFound", "WrongVersion")


def allowed_methods(resp):
    return {m.strip().upper() for m in re.split(r"[,\s]+", resp.headers.get("Accept", "")) if m.strip()}


def check_bad_method(ctx, r):
    tid = ctx.ids.get("basic_email") or BOGUS_TEST
    with r.case("setup.spam_test_for_bad_method"):
        ctx.ids.setdefault("spam_for_methods", create_spam(ctx.ent, test_method="seed")["id"])
    sid = ctx.ids.get("spam_for_methods") or BOGUS_TEST
    table = [
        ("/auth", "DELETE", {"GET"}),
        ("/analytics/analytics_auth", "POST", {"GET"}),
        ("/email/tests", "PATCH", {"GET", "POST"}),
        ("/email/clients", "POST", {"GET"}),
        ("/email/clients/default", "POST", {"GET", "PUT"}),
        ("/spam/clients", "DELETE", {"GET"}),
        ("/spam/tests", "PUT", {"GET", "POST"}),
        ("/spam/seedlist", "POST", {"GET"}),
        ("/tests", "POST", {"GET"}),
        (f"/email/tests/{tid}", "PUT", {"GET", "DELETE"}),
        (f"/email/tests/{tid}/results", "DELETE", {"GET"}),
        (f"/email/tests/{tid}/results/reprocess", "GET", {"PUT"}),
        (f"/email/tests/{tid}/content", "POST", {"GET"}),
        (f"/spam/tests/{sid}", "POST", {"GET", "DELETE"}),
    ]
    for path, method, allowed in table:
        with r.case(f"errors.BadMethod.{method}[{path.replace(tid, '<id>').replace(sid, '<id>')}]"):
            resp = ctx.ent.request(method, f"/v5{path}", body={} if method in ("POST", "PUT", "PATCH") else _DEFAULT)
            expect_error(resp, "BadMethod")
            listed = allowed_methods(resp)
            require(allowed <= listed, f"Accept header {resp.headers.get('Accept')!r} does not list {sorted(allowed)}")
            require(method not in listed, f"Accept header {resp.headers.get('Accept')!r} lists the refused {method}")


def check_invalid_json(ctx, r):
    cases = [
        ("post_email_test", "POST", "/v5/email/tests", '{"subject": "x", '),
        ("post_spam_test", "POST", "/v5/spam/tests", "not json at all"),
        ("put_default_clients", "PUT", "/v5/email/clients/default", "["),
    ]
    tid = ctx.ids.get("basic_email")
    if tid:
        cases.append(("put_reprocess", "PUT", f"/v5/email/tests/{tid}/results/reprocess", "{clients:"))
    for label, method, path, raw in cases:
        with r.case(f"errors.InvalidJSON.{label}"):
            expect_error(ctx.ent.request(method, path, raw=raw), "InvalidJSON")


def check_permissive_body(ctx, r):
    with r.case("permissive.json_body_without_content_type"):
        body = json.dumps(email_body(clients=[ctx.c1]))
        resp = ctx.ent.request("POST", "/v5/email/tests", raw=body, content_type=None)
        require(isinstance(ok_json(resp).get("id"), str), f"no id: {resp.brief()}")
    with r.case("permissive.json_body_with_text_plain_type"):
        body = json.dumps(email_body(clients=[ctx.c1]))
        resp = ctx.ent.request("POST", "/v5/email/tests", raw=body, content_type="text/plain")
        require(isinstance(ok_json(resp).get("id"), str), f"no id: {resp.brief()}")


def check_invalid_parameter(ctx, r):
    for label, query in (("results_not_a_number", "results=abc"), ("page_not_a_number", "page=abc"),
                         ("from_unparseable", "from=not%20a%20date%20at%20all"),
                         ("to_unparseable", "to=32/13/2020%2099:99")):
        with r.case(f"errors.InvalidParameter.{label}"):
            expect_error(ctx.ent.get(f"/tests?{query}"), "InvalidParameter")
    with r.case("errors.InvalidParameter.on_email_and_spam_lists"):
        expect_error(ctx.ent.get("/email/tests?results=abc"), "InvalidParameter")
        expect_error(ctx.ent.get("/spam/tests?results=abc"), "InvalidParameter")


# ----------------------------------------------------------------------------------------
# Area: email clients (4.3)


def check_clients(ctx, r):
    with r.case("clients.list_shape"):
        j = ok_json(ctx.boot.get("/email/clients"))
        require(isinstance(j.get("clients"), dict) and j["clients"], f"`clients` not a non-empty object: {j}")
        for cid, c in j["clients"].items():
            check_client_shape(cid, c)
        ctx.catalogue = j["clients"]
    with r.case("clients.default_list_shape"):
        j = ok_json(ctx.boot.get("/email/clients/default"))
        require(is_str_list(j.get("clients")), f"`clients` not an array of strings: {j}")
        unknown = set(j["clients"]) - set(ctx.catalogue)
        require(not unknown, f"default ids not in the client list: {sorted(unknown)}")
        ctx.default_ids = j["clients"]
    with r.case("clients.default_list_matches_default_flags"):
        flagged = {cid for cid, c in need(ctx.catalogue, "no catalogue").items() if c.get("default")}
        require(set(ctx.default_ids) == flagged,
                f"default list {sorted(ctx.default_ids)} != clients with default:true {sorted(flagged)}")
    with r.case("clients.catalogue_has_free_and_nonfree"):
        need(ctx.catalogue, "no catalogue")
        require(ctx.free_ids and set(ctx.catalogue) - ctx.free_ids,
                f"free={sorted(ctx.free_ids)} of {len(ctx.catalogue)} clients")
    with r.case("clients.sandbox_list_shape"):
        j = ok_json(ctx.sandbox.get("/email/clients"))
        require(isinstance(j.get("clients"), dict), f"`clients` not an object: {j}")
        for cid, c in j["clients"].items():
            check_client_shape(cid, c)
        require(is_str_list(ok_json(ctx.sandbox.get("/email/clients/default")).get("clients")), "default not a list")


def check_default_clients(ctx, r):
    api = ctx.accounts.get("defaults")
    a, b = ctx.pick(), ctx.pick(exclude=(ctx.pick(),))

    def current():
        return ok_json(api.get("/email/clients/default"))["clients"]

    with r.case("default_clients.rule1_invalid_removed_and_warned"):
        need(api and a and b, "no defaults account or fewer than two clients")
        j = ok_json(api.put("/email/clients/default", {"clients": [a, BOGUS_CLIENT, b]}))
        require(is_str_list(j.get("clients")) and set(j["clients"]) == {a, b},
                f"expected clients {{{a}, {b}}}, got {j}")
        require(j.get("warnings"), f"no `warnings` reported for the invalid id: {j}")
        require(set(current()) == {a, b}, f"GET default after PUT: {current()}")
    with r.case("default_clients.valid_only_no_warnings"):
        need(api and a, "prerequisite")
        j = ok_json(api.put("/email/clients/default", {"clients": [a]}))
        require(j.get("clients") == [a], f"expected [{a}], got {j}")
        require(not j.get("warnings"), f"warnings without invalid ids: {j}")
    with r.case("default_clients.used_for_test_without_clients"):
        need(api and current() == [a], "default list is not [a]")
        tid = create_email(api)
        keys = set(ok_json(api.get(f"/email/tests/{tid}/results")))
        api.delete(f"/email/tests/{tid}")
        require(keys == {a}, f"test without clients ran on {sorted(keys)}, default list is [{a}]")
    with r.case("default_clients.rule2_no_valid_client_is_error_and_unchanged"):
        need(api and a, "prerequisite")
        before = current()
        expect_error(api.put("/email/clients/default", {"clients": [BOGUS_CLIENT, BOGUS_CLIENT + "x"]}))
        require(current() == before, f"default list changed from {before} to {current()}")
    with r.case("default_clients.missing_clients_field_is_error"):
        need(api, "prerequisite")
        before = current()
        expect_error(api.put("/email/clients/default", {}))
        require(current() == before, f"default list changed from {before} to {current()}")
    with r.case("permissive.default_clients_comma_separated"):
        need(api and a and b, "prerequisite")
        j = ok_json(api.put("/email/clients/default", {"clients": f"{a},{b}"}))
        require(set(j.get("clients") or []) == {a, b}, f"expected {{{a}, {b}}}, got {j}")
    with r.case("default_clients.rule3_empty_array_clears"):
        need(api, "prerequisite")
        j = ok_json(api.put("/email/clients/default", {"clients": []}))
        require(j.get("clients") == [], f"expected clients [], got {j}")
        require(current() == [], f"GET default after clearing: {current()}")
    with r.case("default_clients.rule3_cleared_means_all_clients"):
        need(api and current() == [], "default list not cleared")
        # An alias entry is another name of a listed profile: "all clients" runs each profile once.
        all_ids = {cid for cid, c in ok_json(api.get("/email/clients"))["clients"].items()
                   if not c.get("alias_of")}
        tid = create_email(api)
        keys = set(ok_json(api.get(f"/email/tests/{tid}/results")))
        api.delete(f"/email/tests/{tid}")
        require(keys == all_ids, f"cleared defaults ran {len(keys)} clients, account has {len(all_ids)}; "
                                 f"missing {sorted(all_ids - keys)[:5]}")


# ----------------------------------------------------------------------------------------
# Area: plans (standard / free / client-restricted / reseller)


def check_standard_plan(ctx, r):
    std = ctx.accounts.get("std")
    c1 = ctx.pick()
    for field, value in (("reference_id", "ref-x"), ("customer_id", "cust-x"), ("headers", {"X-Team": "a"})):
        with r.case(f"errors.PermissionError.standard_email_{field}"):
            expect_error(need(std, "no std account").post("/email/tests", email_body(clients=[c1], **{field: value})),
                         "PermissionError")
    for field in ("reference_id", "customer_id"):
        with r.case(f"errors.PermissionError.standard_spam_{field}"):
            expect_error(need(std, "no std account").post(
                "/spam/tests", {"subject": "s", "html": HTML, "test_method": "seed", field: "v"}), "PermissionError")
    for path, params in (("/tests", {"headers[X-Team]": "a"}), ("/email/tests", {"headers[X-Team]": "a"}),
                         ("/spam/tests", {"headers[X-Team]": "a"}), ("/tests", {"customer_id": "c"}),
                         ("/tests", {"reference_id": "r"})):
        with r.case(f"errors.PermissionError.standard_search_{path}?{next(iter(params))}"):
            expect_error(need(std, "no std account").get(q(path, params)), "PermissionError")
    with r.case("email.standard_response_has_no_enterprise_fields"):
        j = ok_json(need(std, "no std account").post("/email/tests", email_body(clients=[c1])))
        require(isinstance(j.get("id"), str), f"no id: {j}")
        require("reference_id" not in j and "customer_id" not in j, f"enterprise-only fields in {j}")
    with r.case("errors.InvalidFreeClient.free_test_with_nonfree_client"):
        expect_error(need(std, "no std").post("/email/tests", email_body(free_test=True, clients=[ctx.nonfree])),
                     "InvalidFreeClient")
    with r.case("permissive.free_test_string_true"):
        expect_error(need(std, "no std").post("/email/tests", email_body(free_test="true", clients=[ctx.nonfree])),
                     "InvalidFreeClient")
    with r.case("email.free_test_with_free_client"):
        free_c = need(ctx.pick(lambda c: c.get("free") is True), "no free client")
        ok_json(need(std, "no std").post("/email/tests", email_body(free_test=True, clients=[free_c])))


def check_free_plan(ctx, r):
    free = ctx.accounts.get("free")
    with r.case("errors.InvalidFreeClient.free_plan_nonfree_client"):
        expect_error(need(free, "no free account").post("/email/tests", email_body(clients=[ctx.nonfree])),
                     "InvalidFreeClient")
    with r.case("plans.free_plan_free_client_ok"):
        free_c = need(ctx.pick(lambda c: c.get("free") is True), "no free client")
        tid = create_email(need(free, "no free account"), clients=[free_c])
        require(set(ok_json(free.get(f"/email/tests/{tid}/results"))) == {free_c}, "results keys differ")
    with r.case("plans.free_plan_default_run_only_free_clients"):
        tid = create_email(need(free, "no free account"))
        keys = set(ok_json(free.get(f"/email/tests/{tid}/results")))
        require(keys and keys <= ctx.free_ids, f"non-free clients in a free-plan test: {sorted(keys - ctx.free_ids)}")
    with r.case("errors.PermissionError.free_plan_reference_id"):
        expect_error(need(free, "no free account").post("/email/tests", email_body(reference_id="r")),
                     "PermissionError")


def check_restricted_plan(ctx, r):
    api = ctx.accounts.get("restricted")
    allowed = set(getattr(ctx, "restricted_ids", []))
    other = ctx.pick(exclude=tuple(allowed))
    with r.case("clients.restricted_lists_only_eligible"):
        j = ok_json(need(api, "no restricted account").get("/email/clients"))
        require(set(j["clients"]) == allowed, f"listed {sorted(j['clients'])}, eligible {sorted(allowed)}")
    with r.case("clients.restricted_default_within_eligible"):
        ids = ok_json(need(api, "no restricted account").get("/email/clients/default"))["clients"]
        require(set(ids) <= allowed, f"default list {ids} outside {sorted(allowed)}")
    with r.case("errors.InvalidClient.restricted_ineligible_client"):
        need(other, "no client outside the restriction")
        expect_error(need(api, "no restricted account").post("/email/tests", email_body(clients=[other])),
                     "InvalidClient", "PermissionError")
    with r.case("plans.restricted_test_without_clients_within_eligible"):
        tid = create_email(need(api, "no restricted account"))
        keys = set(ok_json(api.get(f"/email/tests/{tid}/results")))
        require(keys <= allowed, f"ran {sorted(keys)} outside {sorted(allowed)}")
    with r.case("plans.restricted_cleared_defaults_run_all_eligible"):
        ok_json(need(api, "no restricted account").put("/email/clients/default", {"clients": []}))
        tid = create_email(api)
        keys = set(ok_json(api.get(f"/email/tests/{tid}/results")))
        require(keys == allowed, f"ran {sorted(keys)}, eligible {sorted(allowed)}")
    with r.case("default_clients.restricted_ineligible_only_is_error"):
        need(other, "no client outside the restriction")
        expect_error(need(api, "no restricted account").put("/email/clients/default", {"clients": [other]}))


def check_reseller_plan(ctx, r):
    res = ctx.accounts.get("res")
    c1 = ctx.pick()
    with r.case("errors.MissingCustomerID.email"):
        expect_error(need(res, "no reseller").post("/email/tests", email_body(clients=[c1])), "MissingCustomerID")
    with r.case("errors.MissingCustomerID.spam"):
        expect_error(need(res, "no reseller").post("/spam/tests", {"subject": "s", "html": HTML}),
                     "MissingCustomerID")
    with r.case("plans.reseller_within_limit_echoes_customer_id"):
        for _ in range(2):
            j = ok_json(need(res, "no reseller").post("/email/tests", email_body(clients=[c1], customer_id="cust-1")))
            require(j.get("customer_id") == "cust-1", f"customer_id not echoed: {j}")
    with r.case("errors.TestLimitReached.email"):
        expect_error(need(res, "no reseller").post("/email/tests", email_body(clients=[c1], customer_id="cust-1")),
                     "TestLimitReached")
    with r.case("errors.TestLimitReached.spam"):
        expect_error(need(res, "no reseller").post(
            "/spam/tests", {"subject": "s", "html": HTML, "test_method": "seed", "customer_id": "cust-1"}),
            "TestLimitReached")
    with r.case("plans.reseller_limit_is_per_customer"):
        j = ok_json(need(res, "no reseller").post("/email/tests", email_body(clients=[c1], customer_id="cust-2")))
        require(isinstance(j.get("id"), str), f"no id: {j}")


# ----------------------------------------------------------------------------------------
# Area: email tests (4.2): creation, info, errors on creation


def check_email_creation(ctx, r):
    ent = ctx.ent
    with r.case("email.create_minimal"):
        j = ok_json(ent.post("/email/tests", email_body(subject="Basic subject", clients=[ctx.c1])))
        require(isinstance(j.get("id"), str) and j["id"], f"no string id: {j}")
        require("spam" not in j or j["spam"] is None or "key" in j["spam"], f"unexpected spam object: {j}")
        ctx.ids["basic_email"] = j["id"]
    with r.case("email.test_info_shape"):
        tid = need(ctx.ids.get("basic_email"), "no test")
        j = ok_json(ent.get(f"/email/tests/{tid}"))
        require(j.get("subject") == "Basic subject", f"subject {j.get('subject')!r}")
        require(is_int(j.get("date")) and abs(j["date"] - time.time()) < 600, f"date {j.get('date')!r}")
        present = [k for k in ("completed", "processing", "bounced") if k in j]
        require(present, f"none of completed/processing/bounced present: {j}")
        for k in present:
            require(is_str_list(j[k]), f"{k} is not an array of strings: {j[k]!r}")
        listed = set().union(*(set(j[k]) for k in present))
        require(listed <= {ctx.c1}, f"info lists clients not in the test: {sorted(listed)}")
    with r.case("email.info_date_matches_list_date"):
        tid = need(ctx.ids.get("basic_email"), "no test")
        info = ok_json(ent.get(f"/email/tests/{tid}"))
        entry = [e for e in get_list(ent, "/email/tests", {"results": 200}) if e["id"] == tid]
        require(len(entry) == 1, "test not listed exactly once")
        require(entry[0]["date"] == info["date"], f"list date {entry[0]['date']} != info date {info['date']}")
        require(entry[0]["type"] == "email-test" and entry[0]["headers"] == {}, f"entry {entry[0]}")
    with r.case("email.enterprise_echoes_reference_and_customer_id"):
        j = ok_json(ent.post("/email/tests", email_body(clients=[ctx.c1], reference_id="ref-e", customer_id="cust-e")))
        require(j.get("reference_id") == "ref-e" and j.get("customer_id") == "cust-e", f"not echoed: {j}")
    with r.case("email.clients_array_respected"):
        tid = create_email(ent, clients=[ctx.c1, ctx.c2])
        keys = set(ok_json(ent.get(f"/email/tests/{tid}/results")))
        require(keys == {ctx.c1, ctx.c2}, f"results keys {sorted(keys)}")
    with r.case("permissive.clients_comma_separated"):
        tid = create_email(ent, clients=f"{ctx.c1},{ctx.c2}")
        keys = set(ok_json(ent.get(f"/email/tests/{tid}/results")))
        require(keys == {ctx.c1, ctx.c2}, f"results keys {sorted(keys)}")
    with r.case("permissive.clients_comma_and_space_separated"):
        tid = create_email(ent, clients=f"{ctx.c1}, {ctx.c2}")
        keys = set(ok_json(ent.get(f"/email/tests/{tid}/results")))
        require(keys == {ctx.c1, ctx.c2}, f"results keys {sorted(keys)}")
    with r.case("errors.NoSubject.email"):
        expect_error(ent.post("/email/tests", {"html": HTML, "clients": [ctx.c1]}), "NoSubject")
    with r.case("errors.NoSource.email"):
        expect_error(ent.post("/email/tests", {"subject": "s", "clients": [ctx.c1]}), "NoSource")
    with r.case("errors.InvalidClient.unknown_client"):
        expect_error(ent.post("/email/tests", email_body(clients=[BOGUS_CLIENT])), "InvalidClient")
    with r.case("email.unknown_client_among_valid_rejected_or_dropped"):
        resp = ent.post("/email/tests", email_body(clients=[ctx.c1, BOGUS_CLIENT]))
        if resp.status >= 400:
            expect_error(resp, "InvalidClient")
        else:
            keys = set(ok_json(ent.get(f"/email/tests/{ok_json(resp)['id']}/results")))
            require(BOGUS_CLIENT not in keys, "unknown client present in results")
    with r.case("errors.BadRequest.header_reserved_prefix"):
        expect_error(ent.post("/email/tests", email_body(clients=[ctx.c1], headers={"X-SVC-Thing": "1"})),
                     "BadRequest")
    with r.case("errors.BadRequest.header_without_x_prefix"):
        expect_error(ent.post("/email/tests", email_body(clients=[ctx.c1], headers={"Campaign": "1"})),
                     "BadRequest")
    with r.case("email.invalid_transfer_encoding_rejected"):
        expect_error(ent.post("/email/tests", email_body(clients=[ctx.c1], transfer_encoding="rot13")))
    with r.case("email.charset_accepted"):
        ok_json(ent.post("/email/tests", email_body(clients=[ctx.c1], charset="iso-8859-1", html="<p>caf\u00e9</p>")))


def check_transfer_encodings(ctx, r):
    ent = ctx.ent
    subject, html = "Gr\u00fc\u00dfe encoded", "<p>Gr\u00fc\u00dfe aus K\u00f6ln</p>"
    b64 = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731
    qp_html = "<p>Gr=C3=BC=C3=9Fe aus K=C3=B6ln</p>"
    qp_subject = "Gr=C3=BC=C3=9Fe encoded"
    for enc, s, h in (("base64", b64(subject), b64(html)), ("quoted-printable", qp_subject, qp_html),
                      ("7bit", "plain seven", "<p>seven bit</p>")):
        with r.case(f"email.transfer_encoding_{enc}_decoded"):
            tid = create_email(ent, subject=s, html=h, transfer_encoding=enc, clients=[ctx.c1])
            want_s, want_h = (subject, html) if enc != "7bit" else (s, h)
            got_s = ok_json(ent.get(f"/email/tests/{tid}")).get("subject")
            got_h = ok_json(ent.get(f"/email/tests/{tid}/content")).get("content")
            require(got_s == want_s, f"test info subject {got_s!r}, want {want_s!r}")
            require(got_h == want_h, f"content {got_h!r}, want {want_h!r}")


def check_url_source(ctx, r):
    refused = ["http://127.0.0.1:9/email.html", "http://localhost/email.html", "http://10.1.2.3/email.html",
               "http://192.168.0.1/", "http://172.16.0.1/", "http://169.254.169.254/latest/meta-data/",
               "http://[::1]/", "http://0.0.0.0/", "http://2130706433/", "http://127.1/", "file:///etc/passwd",
               "not a url", "ftp://example.com/email.html", f"{ctx.server.public_url}/healthz"]
    for url in refused:
        with r.case(f"errors.InvalidURL[{url}]"):
            expect_error(ctx.ent.post("/email/tests", {"subject": "u", "url": url, "clients": [ctx.c1]}), "InvalidURL")
    with r.case("errors.InvalidURL.spam_test"):
        expect_error(ctx.ent.post("/spam/tests", {"subject": "u", "url": "http://127.0.0.1:9/"}), "InvalidURL")


# ----------------------------------------------------------------------------------------
# Area: email results, screenshots, full_thumbnail, reprocess, content


def expected_screenshot_keys(test_blocking, client):
    keys = {"default"}
    ib = test_blocking and client.get("image_blocking") is True
    if ib:
        keys.add("no_images")
    if client.get("rotate") is True:
        keys.add("horizontal")
        if ib:
            keys.add("horizontal_no_images")
    return keys


def check_client_result(cid, res, catalogue, test_blocking, micro):
    require(isinstance(res, dict), f"{cid}: result not an object")
    require(res.get("id") == cid, f"{cid}: id {res.get('id')!r}")
    for f in ("display_name", "client", "os", "thumbnail"):
        require(isinstance(res.get(f), str), f"{cid}.{f} not a string: {res.get(f)!r}")
    require(res.get("category") in ("Application", "Mobile", "Web"), f"{cid}.category {res.get('category')!r}")
    cat = catalogue.get(cid, {})
    require(("browser" in res) == ("browser" in cat), f"{cid}: browser presence differs from the client list")
    for f in ("client", "os", "category"):
        if f in cat:
            require(res[f] == cat[f], f"{cid}.{f} {res[f]!r} differs from client list {cat[f]!r}")
    status = res.get("status")
    require(status in ("Complete", "Processing", "Bounced", "Pending"), f"{cid}.status {status!r}")
    details = res.get("status_details")
    require(isinstance(details, dict), f"{cid}.status_details not an object: {details!r}")
    for f in ("submitted", "completed", "attempts"):
        if f in details:
            require(is_int(details[f]), f"{cid}.status_details.{f} not an integer: {details[f]!r}")
    if status == "Complete":
        require(is_int(details.get("completed")), f"{cid}: Complete without integer status_details.completed")
    if status in ("Complete", "Processing"):
        require(is_int(details.get("attempts")), f"{cid}: {status} without integer status_details.attempts")
    if status == "Bounced":
        for f in ("bounce_code", "bounce_message"):
            require(isinstance(details.get(f), str), f"{cid}: Bounced without string {f}")
    shots = res.get("screenshots")
    require(isinstance(shots, dict), f"{cid}.screenshots not an object")
    require(all(isinstance(v, str) for v in shots.values()), f"{cid}.screenshots values not strings")
    if status != "Bounced":
        want = expected_screenshot_keys(test_blocking, cat)
        require(set(shots) == want, f"{cid}.screenshots keys {sorted(shots)}, expected {sorted(want)} "
                                    f"(image_blocking={cat.get('image_blocking')}, rotate={cat.get('rotate')})")
    if micro:
        require(isinstance(res.get("full_thumbnail"), str), f"{cid}: no full_thumbnail under v5.0.1")
    else:
        require("full_thumbnail" not in res, f"{cid}: full_thumbnail present under v5")


def results_test_clients(ctx):
    cat = ctx.catalogue
    picks = [ctx.pick(lambda c: c.get("image_blocking") is True and c.get("rotate") is True),
             ctx.pick(lambda c: c.get("image_blocking") is True),
             ctx.pick(lambda c: not c.get("image_blocking")),
             ctx.pick(lambda c: c.get("rotate") is True)]
    chosen = sorted({p for p in picks if p})
    return chosen or sorted(cat)[:2]


def check_results(ctx, r):
    ent = ctx.ent
    clients = results_test_clients(ctx)
    with r.case("results.create_with_image_blocking"):
        ctx.ids["results_test"] = create_email(ent, clients=clients, image_blocking=True)
    tid = ctx.ids.get("results_test")
    for micro in (False, True):
        version = "v5.0.1" if micro else "v5"
        with r.case(f"results.{version}_shape_and_screenshot_keys"):
            j = ok_json(ent.get(f"/email/tests/{need(tid, 'no test')}/results", version=version))
            require(set(j) == set(clients), f"results keys {sorted(j)}, test clients {clients}")
            for cid, res in j.items():
                check_client_result(cid, res, ctx.catalogue, True, micro)
        with r.case(f"results.{version}_single_client"):
            cid = clients[0]
            j = ok_json(ent.get(f"/email/tests/{need(tid, 'no test')}/results/{qp(cid)}", version=version))
            require(set(j) == {cid}, f"expected an object keyed by {cid} only, got keys {sorted(j)[:5]}")
            check_client_result(cid, j[cid], ctx.catalogue, True, micro)
    with r.case("errors.ClientNotFound.client_not_in_test"):
        other = need(ctx.pick(exclude=tuple(clients)), "every client is in the test")
        expect_error(ent.get(f"/email/tests/{need(tid, 'no test')}/results/{qp(other)}"), "ClientNotFound")
    with r.case("errors.ClientNotFound_or_InvalidClient.unknown_client"):
        expect_error(ent.get(f"/email/tests/{need(tid, 'no test')}/results/{BOGUS_CLIENT}"),
                     "ClientNotFound", "InvalidClient")
    with r.case("errors.NoClient.empty_client_segment"):
        expect_error(ent.get(f"/email/tests/{need(tid, 'no test')}/results/"), "NoClient")
    with r.case("errors.NotFound.unknown_sub_resource_of_test"):
        expect_error(ent.get(f"/email/tests/{need(tid, 'no test')}/nothing-here"), "NotFound")
    check_permissive_booleans(ctx, r)
    check_screenshot_urls(ctx, r, tid)


def check_permissive_booleans(ctx, r):
    ib = ctx.pick(lambda c: c.get("image_blocking") is True)
    for value, blocked in ((True, True), ("true", True), (1, True), ("1", True), (False, False), ("false", False),
                           (0, False)):
        with r.case(f"permissive.image_blocking={value!r}"):
            need(ib, "no client supports image blocking")
            tid = create_email(ctx.ent, clients=[ib], image_blocking=value)
            ctx.ids.setdefault("ib_tests", []).append(tid)
            shots = ok_json(ctx.ent.get(f"/email/tests/{tid}/results"))[ib]["screenshots"]
            require(("no_images" in shots) == blocked, f"screenshots keys {sorted(shots)} for image_blocking={value!r}")


def check_screenshot_urls(ctx, r, tid):
    ent = ctx.ent

    def first_unfinished():
        results = ok_json(ent.get(f"/email/tests/{tid}/results"))
        for cid, res in sorted(results.items()):
            if res["status"] != "Complete":
                return cid, res
        return None, None

    with r.case("screenshots.urls_on_public_url"):
        results = ok_json(ent.get(f"/email/tests/{need(tid, 'no test')}/results"))
        urls = [u for res in results.values() for u in list(res["screenshots"].values()) + [res["thumbnail"]]]
        bad = [u for u in urls if not u.startswith(ctx.server.public_url + "/")]
        require(not bad, f"URLs not under --public-url {ctx.server.public_url}: {bad[:2]}")
    for label, auth in (("presigned_without_credentials", None), ("with_basic_credentials", ent.auth)):
        with r.case(f"screenshots.absent_file_403_{label}"):
            cid, res = first_unfinished()
            need(cid, "every screenshot already Complete")
            for url in (res["screenshots"]["default"], res["thumbnail"]):
                got = fetch_url(url, auth)
                now = ok_json(ent.get(f"/email/tests/{tid}/results/{qp(cid)}"))[cid]["status"]
                if now == "Complete":
                    require(got.status in (200, 403), f"{url} -> {got.status} after completion")
                else:
                    require(got.status == 403, f"{url} answered {got.status} while status is {now}, want 403")


def check_reprocess(ctx, r):
    ent = ctx.ent
    tid = ctx.ids.get("results_test")
    path = f"/email/tests/{tid}/results/reprocess"
    with r.case("reprocess.shape_and_remaining_decreases"):
        need(tid, "no test")
        cid = results_test_clients(ctx)[0]
        before = ok_json(ent.get(f"/email/tests/{tid}/results/{qp(cid)}"))[cid]["screenshots"]
        first = ok_json(ent.put(path, {"clients": [cid]}))
        second = ok_json(ent.put(path, {"clients": [cid]}))
        after = ok_json(ent.get(f"/email/tests/{tid}/results/{qp(cid)}"))[cid]["screenshots"]
        where = lambda shots: {k: urllib.parse.urlsplit(v).path for k, v in shots.items()}  # noqa: E731
        require(where(before) == where(after), f"screenshot locations moved on reprocess: {before} -> {after}")
        for j in (first, second):
            require(set(j) == {cid}, f"reprocess response keys {sorted(j)}, want [{cid}]")
            e = j[cid]
            require(isinstance(e.get("success"), bool), f"success not boolean: {e}")
            if e["success"]:
                require(is_int(e.get("remaining_reprocesses")), f"remaining_reprocesses not integer: {e}")
                require(isinstance(e.get("regional"), bool), f"regional not boolean: {e}")
            else:
                require(isinstance(e.get("reason"), str) and e["reason"], f"failure without reason: {e}")
        require(first[cid]["success"] and second[cid]["success"], f"reprocess refused: {first}, {second}")
        require(second[cid]["remaining_reprocesses"] < first[cid]["remaining_reprocesses"],
                f"remaining_reprocesses did not decrease: {first[cid]} then {second[cid]}")
    with r.case("permissive.reprocess_clients_comma_separated"):
        cids = results_test_clients(ctx)[:2]
        j = ok_json(ent.put(need(tid and path, "no test"), {"clients": ",".join(cids)}))
        require(set(j) == set(cids), f"keys {sorted(j)}, want {cids}")
    with r.case("errors.InvalidTestClient.reprocess_client_not_in_test"):
        other = need(ctx.pick(exclude=tuple(results_test_clients(ctx))), "every client is in the test")
        expect_error(ent.put(need(tid and path, "no test"), {"clients": [other]}), "InvalidTestClient")
    with r.case("errors.InvalidTestClient_or_InvalidClient.reprocess_unknown_client"):
        expect_error(ent.put(need(tid and path, "no test"), {"clients": [BOGUS_CLIENT]}),
                     "InvalidTestClient", "InvalidClient")
    with r.case("errors.NoClients.reprocess_without_clients"):
        expect_error(ent.put(need(tid and path, "no test"), {}), "NoClients")
    with r.case("reprocess.empty_clients_array_is_error"):
        expect_error(ent.put(need(tid and path, "no test"), {"clients": []}))


def check_content(ctx, r):
    ent = ctx.ent
    with r.case("content.create"):
        ctx.ids["content_test"] = create_email(ent, clients=[ctx.c1], html=HTML)
    tid = ctx.ids.get("content_test")
    with r.case("content.original_html"):
        j = ok_json(ent.get(f"/email/tests/{need(tid, 'no test')}/content"))
        require(set(j) == {"content"}, f"keys {sorted(j)}")
        require(j["content"] == HTML, f"content {j['content'][:120]!r}")
    with r.case("content.inlinecss"):
        j = ok_json(ent.get(f"/email/tests/{need(tid, 'no test')}/content/inlinecss"))
        c = j.get("content")
        require(isinstance(c, str), f"content not a string: {j}")
        require(re.search(r"<p\b[^>]*style\s*=\s*[\"'][^\"']*color\s*:\s*red", c, re.I),
                f"p rule not inlined: {c[:200]!r}")
    with r.case("content.textonly"):
        j = ok_json(ent.get(f"/email/tests/{need(tid, 'no test')}/content/textonly"))
        c = j.get("content")
        require(isinstance(c, str) and "Hello conformance" in c, f"text missing: {j}")
        require("<p" not in c and "</" not in c, f"tags left in text-only content: {c[:200]!r}")


# ----------------------------------------------------------------------------------------
# Area: spam (email tests with spam, spam tests, seed lists, SMTP)


def check_spam_on_email(ctx, r):
    ent = ctx.ent
    base = ctx.ids.get("basic_email")
    with r.case("errors.NoSpamResults.email_without_spam"):
        expect_error(ent.get(f"/email/tests/{need(base, 'no test')}/spam/results"), "NoSpamResults")
    with r.case("errors.NoSeedList.email_without_spam"):
        expect_error(ent.get(f"/email/tests/{need(base, 'no test')}/spam/seedlist"), "NoSeedList", "NoSpamResults")
    with r.case("spam_email.svc_results_shape"):
        tid = create_email(ent, clients=[ctx.c1], spam={"test_method": "svc"})
        ctx.ids["email_svc"] = tid
        for e in ok_json(ent.get(f"/email/tests/{tid}/spam/results"), list):
            check_spam_entry(e)
    with r.case("spam_email.default_method_is_svc"):
        tid = create_email(ent, clients=[ctx.c1], spam={})
        ok_json(ent.get(f"/email/tests/{tid}/spam/results"), list)
        expect_error(ent.get(f"/email/tests/{tid}/spam/seedlist"), "NoSeedList")
    with r.case("errors.NoSeedList.email_svc_spam"):
        expect_error(ent.get(f"/email/tests/{need(ctx.ids.get('email_svc'), 'no test')}/spam/seedlist"), "NoSeedList")
    with r.case("spam_email.seed_response_and_seedlist"):
        j = ok_json(ent.post("/email/tests", email_body(clients=[ctx.c1], spam={"test_method": "seed"})))
        spam = j.get("spam")
        require(isinstance(spam, dict) and isinstance(spam.get("key"), str) and spam["key"], f"no spam.key: {j}")
        require(is_str_list(spam.get("address_list")) and spam["address_list"], f"no address_list: {j}")
        got = ok_json(ent.get(f"/email/tests/{j['id']}/spam/seedlist"), list)
        require(sorted(got) == sorted(spam["address_list"]), f"seedlist {got} != {spam['address_list']}")
        ctx.ids["email_seed"] = j["id"]
    with r.case("spam_email.seed_results_shape"):
        for e in ok_json(ent.get(f"/email/tests/{need(ctx.ids.get('email_seed'), 'no test')}/spam/results"), list):
            check_spam_entry(e)
    with r.case("spam_email.reserved_key_used"):
        res = ok_json(ent.get("/spam/seedlist"))
        j = ok_json(ent.post("/email/tests", email_body(clients=[ctx.c1], spam={"test_method": "seed", "key": res["key"]})))
        require(j.get("spam", {}).get("key") == res["key"], f"key {j.get('spam')} != reserved {res['key']}")
        require(sorted(j["spam"].get("address_list") or []) == sorted(res["address_list"]),
                f"address_list differs from the reserved list")
    with r.case("errors.InvalidSpamType.email"):
        expect_error(ent.post("/email/tests", email_body(clients=[ctx.c1], spam={"test_method": "bogus"})),
                     "InvalidSpamType")
    with r.case("spam_email.eoa_alias_or_InvalidSpamType"):
        # 2.1 calls the method "`eoa`-equivalent `svc`", 7.1 lists only svc/smtp/seed: accept either reading.
        resp = ent.post("/email/tests", email_body(clients=[ctx.c1], spam={"test_method": "eoa"}))
        if resp.status >= 400:
            expect_error(resp, "InvalidSpamType")
        else:
            ok_json(ent.get(f"/email/tests/{ok_json(resp)['id']}/spam/results"), list)
    with r.case("errors.SMTPError.email_unresolvable_host"):
        expect_error(ent.post("/email/tests", email_body(clients=[ctx.c1], spam={
            "test_method": "smtp", "smtp_info": {"host": "no-such-host.invalid", "port": 25}})), "SMTPError")
    with r.case("spam_email.smtp_without_smtp_info_is_error"):
        expect_error(ent.post("/email/tests", email_body(clients=[ctx.c1], spam={"test_method": "smtp"})))


def check_spam_tests(ctx, r):
    ent = ctx.ent
    with r.case("spam.clients_shape"):
        j = ok_json(ent.get("/spam/clients"), list)
        require(j, "empty spam client list")
        for c in j:
            require(isinstance(c, dict) and isinstance(c.get("client"), str), f"bad spam client {c!r}")
            require(c.get("type") in ("b2b", "b2c"), f"spam client type {c.get('type')!r}")
            require(isinstance(c.get("description"), str), f"spam client description {c.get('description')!r}")
        ctx.spam_clients = {c["client"] for c in j}
    with r.case("spam.seedlist_reservation"):
        a, b = ok_json(ent.get("/spam/seedlist")), ok_json(ent.get("/spam/seedlist"))
        for j in (a, b):
            require(isinstance(j.get("key"), str) and j["key"], f"no key: {j}")
            require(is_str_list(j.get("address_list")) and j["address_list"], f"no address_list: {j}")
        require(a["key"] != b["key"], "two reservations returned the same key")
    with r.case("spam.create_svc_default_method"):
        j = create_spam(ent, from_address="sender@example.org")
        require(isinstance(j.get("id"), str) and j["id"], f"no id: {j}")
        ctx.ids["spam_svc"] = j["id"]
    with r.case("spam.results_shape"):
        entries = ok_json(ent.get(f"/spam/tests/{need(ctx.ids.get('spam_svc'), 'no test')}"), list)
        for e in entries:
            check_spam_entry(e)
        known = getattr(ctx, "spam_clients", set())
        unknown = {e["client"] for e in entries} - known
        require(not known or not unknown, f"results name filters missing from /spam/clients: {sorted(unknown)}")
    with r.case("errors.NoSeedList.spam_svc"):
        expect_error(ent.get(f"/spam/tests/{need(ctx.ids.get('spam_svc'), 'no test')}/seedlist"), "NoSeedList")
    with r.case("spam.create_seed_and_seedlist"):
        j = create_spam(ent, test_method="seed")
        require(is_str_list(j.get("address_list")) and j["address_list"], f"no address_list: {j}")
        got = ok_json(ent.get(f"/spam/tests/{j['id']}/seedlist"), list)
        require(sorted(got) == sorted(j["address_list"]), f"seedlist {got} != {j['address_list']}")
        ctx.ids["spam_seed"] = j["id"]
    with r.case("spam.reserved_key_used"):
        res = ok_json(ent.get("/spam/seedlist"))
        j = create_spam(ent, test_method="seed", key=res["key"])
        require(sorted(j.get("address_list") or []) == sorted(res["address_list"]), f"{j} vs reserved {res}")
    with r.case("spam.enterprise_echo"):
        j = create_spam(ent, test_method="seed", reference_id="ref-s", customer_id="cust-s")
        require(j.get("reference_id") == "ref-s" and j.get("customer_id") == "cust-s", f"not echoed: {j}")
    with r.case("spam.base64_transfer_encoding_accepted"):
        create_spam(ent, test_method="seed", transfer_encoding="base64",
                    subject=base64.b64encode(b"Spam b64").decode(), html=base64.b64encode(HTML.encode()).decode())
    with r.case("errors.InvalidSpamType.spam"):
        expect_error(ent.post("/spam/tests", {"subject": "s", "html": HTML, "test_method": "bogus"}), "InvalidSpamType")
    with r.case("errors.NoSubject.spam"):
        expect_error(ent.post("/spam/tests", {"html": HTML}), "NoSubject")
    with r.case("errors.NoSource.spam"):
        expect_error(ent.post("/spam/tests", {"subject": "s"}), "NoSource")
    with r.case("errors.SMTPError.spam_unresolvable_host"):
        expect_error(ent.post("/spam/tests", {"subject": "s", "html": HTML, "test_method": "smtp",
                                               "smtp_info": {"host": "no-such-host.invalid"}}), "SMTPError")
    with r.case("spam.smtp_without_host_is_error"):
        expect_error(ent.post("/spam/tests", {"subject": "s", "html": HTML, "test_method": "smtp",
                                               "smtp_info": {"port": 25}}))
    with r.case("errors.BadRequest.some_malformed_request"):
        # The spec does not bind BadRequest to one condition; at least one of these should carry it.
        attempts = {
            "smtp_without_smtp_info": ent.post("/spam/tests", {"subject": "s", "html": HTML, "test_method": "smtp"}),
            "body_is_array": ent.post("/spam/tests", [1, 2]),
            "bad_secure": ent.post("/spam/tests", {"subject": "s", "html": HTML, "test_method": "smtp",
                                                   "smtp_info": {"host": "no-such-host.invalid", "secure": "bogus"}}),
            "subject_not_string": ent.post("/email/tests", {"subject": {"a": 1}, "html": HTML}),
        }
        names = {k: error_name(v) for k, v in attempts.items()}
        require("BadRequest" in names.values(), f"no BadRequest among {names}")


# The SMTP helper stands for a caller's server. It listens on 127.0.0.2, the one non-public address
# the server's network policy is configured to admit (see Server.start), so 127.0.0.1 and the rest
# stay refused for `url` sources and `smtp_info` hosts alike.
SMTP_HELPER_HOST = "127.0.0.2"

SMTP_HELPER = r'''
import signal, sys
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
USERS = {b"test": b"secret"}
class Handler:
    async def handle_DATA(self, server, session, envelope):
        return "250 OK stored"
def auth(server, session, envelope, mechanism, data):
    ok = isinstance(data, LoginPassword) and USERS.get(data.login) == data.password
    return AuthResult(success=ok, handled=False)
ctl = Controller(Handler(), hostname=sys.argv[2], port=int(sys.argv[1]), authenticator=auth,
                 auth_required=True, auth_require_tls=False, server_hostname="probe.local")
ctl.start()
print("ready", flush=True)
signal.sigwait({signal.SIGINT, signal.SIGTERM})
ctl.stop()
'''


def aiosmtpd_python():
    for py in dict.fromkeys([sys.executable, "/usr/bin/python3", shutil.which("python3") or ""]):
        if py and subprocess.run([py, "-c", "import aiosmtpd"], capture_output=True).returncode == 0:
            return py
    return None


@contextlib.contextmanager
def auth_smtp_server(workdir):
    py = aiosmtpd_python()
    if not py:
        yield None
        return
    script = os.path.join(workdir, "smtp_auth_helper.py")
    with open(script, "w") as f:
        f.write(SMTP_HELPER)
    port = free_port()
    proc = subprocess.Popen([py, script, str(port), SMTP_HELPER_HOST], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        yield port if ready and proc.stdout.readline().strip() == b"ready" else None
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def check_smtp_auth(ctx, r):
    def body(password):
        return {"subject": "smtp auth", "html": HTML, "test_method": "smtp",
                "smtp_info": {"host": SMTP_HELPER_HOST, "port": port, "secure": "", "username": "test",
                              "password": password}}

    with auth_smtp_server(ctx.server.workdir) as port:
        with r.case("spam.smtp_valid_credentials_accepted"):
            need(port, "aiosmtpd not importable by any local python3; SMTPAuthenticationError not checked")
            j = ok_json(ctx.ent.post("/spam/tests", body("secret")))
            require(isinstance(j.get("id"), str), f"no id: {j}")
        with r.case("errors.SMTPAuthenticationError.wrong_password"):
            need(port, "aiosmtpd not importable by any local python3; SMTPAuthenticationError not checked")
            expect_error(ctx.ent.post("/spam/tests", body("WRONG")), "SMTPAuthenticationError")
        with r.case("errors.SMTPAuthenticationError.email_with_spam"):
            need(port, "aiosmtpd not importable")
            b = body("WRONG")
            spam = {k: b[k] for k in ("test_method", "smtp_info")}
            expect_error(ctx.ent.post("/email/tests", email_body(clients=[ctx.c1], spam=spam)), "SMTPAuthenticationError")


# ----------------------------------------------------------------------------------------
# Area: lists (4.2 / 4.4 / 4.5)


BULK = 200
TOTAL = BULK + 4


def seed_lister(ctx):
    """204 tests on a dedicated enterprise account: 200 bulk seed spam tests (seed tests send nothing),
    then 4 named ones a second later."""
    api = ctx.lister
    bulk = [create_spam(api, subject=f"bulk {i}", test_method="seed")["id"] for i in range(BULK)]
    time.sleep(1.1)
    c1 = ctx.c1
    named = {
        "E1": create_email(api, subject="Alpha Launch", clients=[c1], headers={"X-Campaign": "spring", "X-Team": "a"},
                           customer_id="cust-A", reference_id="ref-1"),
        "E2": create_email(api, subject="alpha beta", clients=[c1], headers={"X-Campaign": "spring", "X-Team": "b"},
                           customer_id="cust-B"),
        "E3": create_email(api, subject="Gamma 50% off & more", clients=[c1], reference_id="ref-2"),
        "S1": create_spam(api, subject="ALPHA spam", test_method="seed", customer_id="cust-A")["id"],
    }
    return bulk, named


def check_lists(ctx, r):
    data = {}
    with r.case(f"lists.seed_{TOTAL}_tests"):
        data["bulk"], data["named"] = seed_lister(ctx)
    need_data = lambda: need(data.get("named"), "list data not created")  # noqa: E731
    api = ctx.accounts.get("lister")
    check_list_paging(ctx, r, api, data, need_data)
    check_list_filters(ctx, r, api, data, need_data)
    check_list_dates(ctx, r, api, data, need_data)


def check_list_paging(ctx, r, api, data, need_data):
    with r.case("lists.default_50_results"):
        need_data()
        n = len(get_list(api, "/tests"))
        require(n == 50, f"{n} entries without `results`")
    with r.case("lists.results_200_is_a_full_page"):
        need_data()
        n = len(get_list(api, "/tests", {"results": 200}))
        require(n == 200, f"{n} entries for results=200 with {TOTAL} tests")
    with r.case("lists.paging_reaches_every_test"):
        n = need_data()
        got = all_ids(api, "/tests", {})
        require(len(got) == TOTAL and len(set(got)) == TOTAL, f"{len(got)} ids ({len(set(got))} distinct)")
        require(set(got) == set(n.values()) | set(data["bulk"]), "paged ids differ from the created ones")
    with r.case("lists.newest_first_by_date"):
        need_data()
        entries = get_list(api, "/tests", {"results": 200}) + get_list(api, "/tests", {"results": 200, "page": 2})
        dates = [e["date"] for e in entries]
        require(dates == sorted(dates, reverse=True), "dates are not non-increasing")
        first4 = ids_of(entries[:4])
        require(set(first4) == set(data["named"].values()), f"the 4 newest (created 1 s later) are not first: {first4}")
    with r.case("lists.newest_first_on_area_lists"):
        need_data()
        for path in ("/email/tests", "/spam/tests"):
            dates = [e["date"] for e in get_list(api, path, {"results": 200})]
            require(dates == sorted(dates, reverse=True), f"{path}: dates are not non-increasing")
    with r.case("lists.newest_first_within_same_second"):
        n = need_data()
        got = [i for i in ids_of(get_list(api, "/tests", {"results": 10})) if i in set(n.values())]
        want = [n["S1"], n["E3"], n["E2"], n["E1"]]
        require(got == want, f"order {got}, reverse creation order {want}")
    with r.case("lists.results_1"):
        need_data()
        got = ids_of(get_list(api, "/tests", {"results": 1}))
        require(got == [data["named"]["S1"]], f"results=1 -> {got}, want the newest test")
    with r.case("lists.paging_consistent"):
        need_data()
        whole = ids_of(get_list(api, "/tests", {"results": 20}))
        p1 = ids_of(get_list(api, "/tests", {"results": 10, "page": 1}))
        p2 = ids_of(get_list(api, "/tests", {"results": 10, "page": 2}))
        require(p1 + p2 == whole, "page 1 + page 2 (10 each) != first 20")
        require(ids_of(get_list(api, "/tests", {"results": 10})) == p1, "page defaults to 1")
        p2_default = ids_of(get_list(api, "/tests", {"page": 2}))
        require(p2_default == ids_of(get_list(api, "/tests", {"results": 100}))[50:100], "page 2 with default size")
    with r.case("lists.last_partial_page"):
        need_data()
        n = len(get_list(api, "/tests", {"results": 50, "page": 5}))
        require(n == TOTAL - 200, f"page 5 of 50 holds {n}, want {TOTAL - 200}")
    with r.case("lists.page_beyond_last_is_empty"):
        need_data()
        for path in ("/tests", "/email/tests", "/spam/tests"):
            resp = api.get(q(path, {"results": 50, "page": 9}))
            require(ok_json(resp, list) == [], f"{path} page 9: {resp.brief()}")
    # Out-of-range values: the spec only gives the range; an error or a clamped list are both fine.
    for query in ("results=201", "results=1000", "results=0", "results=-3", "page=0", "page=-1"):
        with r.case(f"lists.out_of_range_handled[{query}]"):
            need_data()
            resp = api.get(f"/tests?{query}")
            if resp.status >= 400:
                expect_error(resp)
            else:
                entries = ok_json(resp, list)
                require(len(entries) <= 200, f"{len(entries)} entries for {query} (limit is 200)")


def all_ids(api, path, params):
    out, page = [], 1
    while True:
        batch = ids_of(get_list(api, path, dict(params, results=200, page=page)))
        out += batch
        if len(batch) < 200:
            return out
        page += 1
        require(page < 20, "paging does not end")


def expect_ids(api, path, params, want):
    got = set(all_ids(api, path, params))
    require(got == set(want), f"{path} {params}: got {len(got)} ids, want {len(want)}; "
                              f"extra {sorted(got - set(want))[:3]}, missing {sorted(set(want) - got)[:3]}")


def check_list_filters(ctx, r, api, data, need_data):
    def n():
        return need_data()

    with r.case("lists.per_area_types"):
        need_data()
        emails = get_list(api, "/email/tests", {"results": 200})
        spams = get_list(api, "/spam/tests", {"results": 200}) + get_list(api, "/spam/tests", {"results": 200, "page": 2})
        require({e["type"] for e in emails} <= {"email-test"}, "non-email entry in /email/tests")
        require({e["type"] for e in spams} <= {"spam-test"}, "non-spam entry in /spam/tests")
        require({n()["E1"], n()["E2"], n()["E3"]} == set(ids_of(emails)), "/email/tests differs from the email tests")
        require(set(data["bulk"]) | {n()["S1"]} == set(ids_of(spams)), "/spam/tests differs from the spam tests")
    with r.case("lists.type_filter"):
        expect_ids(api, "/tests", {"type": "email-test"}, [n()["E1"], n()["E2"], n()["E3"]])
        expect_ids(api, "/tests", {"type": "spam-test"}, data["bulk"] + [n()["S1"]])
    with r.case("lists.subject_case_insensitive_contains"):
        expect_ids(api, "/tests", {"subject": "ALPHA"}, [n()["E1"], n()["E2"], n()["S1"]])
        expect_ids(api, "/email/tests", {"subject": "alpha"}, [n()["E1"], n()["E2"]])
        expect_ids(api, "/spam/tests", {"subject": "Alpha"}, [n()["S1"]])
        expect_ids(api, "/tests", {"subject": "launch"}, [n()["E1"]])
    with r.case("lists.subject_special_characters"):
        expect_ids(api, "/tests", {"subject": "50% off & more"}, [n()["E3"]])
    with r.case("lists.subject_plus_encoded_space"):
        got = ids_of(get_list(api, "/tests?subject=alpha+launch&results=200"))
        require(got == [n()["E1"]], f"subject=alpha+launch -> {got}")
    with r.case("lists.subject_and_type_combined"):
        expect_ids(api, "/tests", {"subject": "alpha", "type": "spam-test"}, [n()["S1"]])
    with r.case("lists.headers_single"):
        expect_ids(api, "/tests", {"headers[X-Campaign]": "spring"}, [n()["E1"], n()["E2"]])
        expect_ids(api, "/email/tests", {"headers[X-Campaign]": "spring"}, [n()["E1"], n()["E2"]])
    with r.case("lists.headers_and_match"):
        expect_ids(api, "/tests", {"headers[X-Campaign]": "spring", "headers[X-Team]": "a"}, [n()["E1"]])
        expect_ids(api, "/tests", {"headers[X-Campaign]": "winter"}, [])
        expect_ids(api, "/tests", {"headers[X-Campaign]": "spring", "headers[X-Missing]": "x"}, [])
    with r.case("lists.headers_name_case_insensitive"):
        expect_ids(api, "/tests", {"headers[x-campaign]": "spring"}, [n()["E1"], n()["E2"]])
    with r.case("lists.entry_headers"):
        entries = {e["id"]: e for e in get_list(api, "/tests", {"results": 10})}
        h1 = {k.lower(): v for k, v in entries[n()["E1"]]["headers"].items()}
        require(h1 == {"x-campaign": "spring", "x-team": "a"}, f"E1 headers {entries[n()['E1']]['headers']}")
        require(entries[n()["E3"]]["headers"] == {}, f"E3 headers {entries[n()['E3']]['headers']}")
    with r.case("lists.customer_id_filter"):
        expect_ids(api, "/tests", {"customer_id": "cust-A"}, [n()["E1"], n()["S1"]])
        expect_ids(api, "/tests", {"customer_id": "cust-none"}, [])
    with r.case("lists.reference_id_filter"):
        expect_ids(api, "/tests", {"reference_id": "ref-2"}, [n()["E3"]])
    with r.case("lists.tenant_isolation"):
        need_data()
        mine = set(all_ids(api, "/tests", {}))
        theirs = set(all_ids(ctx.ent, "/tests", {}))
        require(not (mine & theirs), "two accounts' lists share ids")
    with r.case("lists.sandbox_lists_well_formed"):
        for path in ("/tests", "/email/tests", "/spam/tests"):
            get_list(ctx.sandbox, path)


def check_list_dates(ctx, r, api, data, need_data):
    now = int(time.time())
    fmt = lambda t: datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")  # noqa: E731
    everything = lambda: data["bulk"] + list(need_data().values())  # noqa: E731
    forms = {
        "unix": (str(now - 3600), str(now + 3600), str(now - 86400 * 2)),
        "datetime": (fmt(now - 86400 * 2), fmt(now + 86400 * 2), fmt(now - 86400 * 3)),
        "relative": ("yesterday", None, "yesterday"),
    }
    for form, (past, future, long_ago) in forms.items():
        with r.case(f"lists.from_{form}_includes_recent"):
            expect_ids(api, "/tests", {"from": past}, everything())
        if future:
            with r.case(f"lists.from_{form}_future_is_empty"):
                need_data()
                expect_ids(api, "/tests", {"from": future}, [])
            with r.case(f"lists.from_to_{form}_window"):
                expect_ids(api, "/tests", {"from": past, "to": future}, everything())
        with r.case(f"lists.to_{form}_past_excludes_recent"):
            need_data()
            expect_ids(api, "/tests", {"to": long_ago}, [])
    with r.case("lists.date_filters_on_area_lists"):
        n = need_data()
        expect_ids(api, "/email/tests", {"from": "yesterday"}, [n["E1"], n["E2"], n["E3"]])
        expect_ids(api, "/spam/tests", {"to": str(now - 86400 * 2)}, [])
    with r.case("lists.datetime_plus_encoded_space"):
        need_data()
        got = get_list(api, "/tests?results=200&page=2&from=" + fmt(now - 86400 * 2).replace(" ", "+"))
        require(len(got) == TOTAL - 200, f"{len(got)} entries on page 2, want {TOTAL - 200}")


# ----------------------------------------------------------------------------------------
# Area: tenant isolation, deletion, nonexistent ids


def check_invalid_ids(ctx, r, label, api, tid, sid, cid):
    for method, path, body in email_test_endpoints(tid, cid):
        with r.case(f"errors.InvalidTestID.{label}.{method}[{path.replace(qp(tid), '<id>')}]"):
            expect_error(call(api, method, path, body), "InvalidTestID")
    with r.case(f"errors.InvalidTestID.{label}.v5.0.1[/email/tests/<id>/results]"):
        expect_error(api.get(f"/email/tests/{qp(tid)}/results", version="v5.0.1"), "InvalidTestID")
    for method, path, body in spam_test_endpoints(sid):
        with r.case(f"errors.InvalidTestID.{label}.{method}[{path.replace(qp(sid), '<id>')}]"):
            expect_error(call(api, method, path, body), "InvalidTestID")


def check_isolation(ctx, r):
    owner, intruder, c1 = ctx.accounts.get("std"), ctx.accounts.get("intruder"), ctx.pick()
    ids = {}
    with r.case("isolation.owner_creates_tests"):
        need(owner and intruder, "accounts missing")
        ids["email"] = ok_json(owner.post("/email/tests", email_body(clients=[c1], spam={"test_method": "seed"})))["id"]
        ids["spam"] = create_spam(owner, test_method="seed")["id"]
    if not ids:
        return
    check_invalid_ids(ctx, r, "other_account", intruder, ids["email"], ids["spam"], c1)
    with r.case("isolation.owner_still_has_tests"):
        ok_json(owner.get(f"/email/tests/{ids['email']}"))
        ok_json(owner.get(f"/email/tests/{ids['email']}/spam/seedlist"), list)
        ok_json(owner.get(f"/spam/tests/{ids['spam']}"), list)
    with r.case("isolation.sandbox_cannot_read_real_test"):
        expect_error(ctx.sandbox.get(f"/email/tests/{ids['email']}/content"), "InvalidTestID")


def check_delete(ctx, r):
    ent = ctx.ent
    ids = {}
    with r.case("delete.email_test"):
        ids["email"] = ok_json(ent.post("/email/tests", email_body(clients=[ctx.c1], spam={"test_method": "seed"})))["id"]
        require_success(ent.delete(f"/email/tests/{ids['email']}"))
    with r.case("delete.spam_test"):
        ids["spam"] = create_spam(ent, test_method="seed")["id"]
        require_success(ent.delete(f"/spam/tests/{ids['spam']}"))
    with r.case("delete.removed_from_lists"):
        need(len(ids) == 2, "deletes failed")
        listed = set(ids_of(get_list(ent, "/tests", {"results": 200})))
        require(not (listed & set(ids.values())), "deleted test still listed")
    if len(ids) == 2:
        check_invalid_ids(ctx, r, "deleted", ent, ids["email"], ids["spam"], ctx.c1)
    check_invalid_ids(ctx, r, "nonexistent", ent, BOGUS_TEST, BOGUS_TEST + "s", ctx.pick() or "x")


# ----------------------------------------------------------------------------------------
# Area: sandbox


def check_sandbox(ctx, r):
    sb, ent = ctx.sandbox, ctx.ent
    with r.case("sandbox.credentials_create_email_test"):
        j = ok_json(sb.post("/email/tests", email_body()))
        require(isinstance(j.get("id"), str), f"no id: {j}")
    with r.case("sandbox.credentials_seed_email_test"):
        j = ok_json(sb.post("/email/tests", email_body(spam={"test_method": "seed"})))
        require(isinstance(j.get("spam", {}).get("key"), str) and is_str_list(j["spam"].get("address_list")),
                f"ill-formed seed response: {j}")
    with r.case("sandbox.credentials_spam_seed_test"):
        j = ok_json(sb.post("/spam/tests", {"subject": "s", "html": HTML, "test_method": "seed"}))
        require(isinstance(j.get("id"), str) and is_str_list(j.get("address_list")), f"ill-formed: {j}")
    with r.case("sandbox.credentials_seedlist_reservation"):
        j = ok_json(sb.get("/spam/seedlist"))
        require(isinstance(j.get("key"), str) and is_str_list(j.get("address_list")), f"ill-formed: {j}")
    for value in (True, "true", 1):
        with r.case(f"sandbox.flag_{value!r}_creates_nothing"):
            before = set(ids_of(get_list(ent, "/tests", {"results": 200})))
            j = ok_json(ent.post("/email/tests", email_body(clients=[ctx.c1], sandbox=value, subject="sandboxed")))
            require(isinstance(j.get("id"), str), f"no id: {j}")
            after = set(ids_of(get_list(ent, "/tests", {"results": 200})))
            require(after == before, f"sandbox test created {sorted(after - before)}")
    with r.case("sandbox.flag_on_spam_test_creates_nothing"):
        before = set(ids_of(get_list(ent, "/tests", {"results": 200})))
        j = ok_json(ent.post("/spam/tests", {"subject": "s", "html": HTML, "sandbox": True, "test_method": "seed"}))
        require(isinstance(j.get("id"), str) and is_str_list(j.get("address_list")), f"ill-formed: {j}")
        require(set(ids_of(get_list(ent, "/tests", {"results": 200}))) == before, "sandbox spam test was listed")


# ----------------------------------------------------------------------------------------
# Area: auto-inbox (1, 4.6)


def send_inbox_mail(ctx, local, subject, extra_headers):
    msg = EmailMessage()
    msg["From"] = "sender@example.org"
    msg["To"] = f"{local}@{INBOX_DOMAIN}"
    msg["Subject"] = subject
    for k, v in extra_headers.items():
        msg[k] = v
    msg.set_content("plain")
    msg.add_alternative(HTML, subtype="html")
    with smtplib.SMTP("127.0.0.1", ctx.server.smtp_port, timeout=10) as s:
        s.send_message(msg, to_addrs=[f"{local}@{INBOX_DOMAIN}"])


def wait_for_subject(api, subject, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        entries = get_list(api, "/tests", {"subject": subject})
        if entries:
            return entries
        time.sleep(0.3)
    return []


def check_auto_inbox(ctx, r):
    api, local = ctx.accounts.get("inbox"), getattr(ctx, "inbox_local", None)
    sent = {}
    with r.case("inbox.smtp_accepts_mail"):
        need(api and local, "no auto-inbox account")
        tag = secrets.token_hex(3)
        sent["plus"] = f"Inbox plus {tag}"
        send_inbox_mail(ctx, f"{local}+cust-plus", sent["plus"],
                        {"X-Campaign": "inbox", "X-SVC-CLIENTS": ctx.c1})
        sent["hdr"] = f"Inbox headers {tag}"
        send_inbox_mail(ctx, local, sent["hdr"], {"X-SVC-USER-GUID": "cust-hdr", "X-SVC-REFERENCE-ID": "ref-hdr",
                                                  "X-SVC-CLIENTS": f"{ctx.c1},{ctx.c2}"})
    entries = {}
    with r.case("inbox.mail_becomes_listed_email_test"):
        need(sent, "mail not sent")
        for k in ("plus", "hdr"):
            found = wait_for_subject(api, sent[k])
            require(len(found) == 1 and found[0]["type"] == "email-test", f"{sent[k]!r} listed as {found}")
            entries[k] = found[0]
    with r.case("inbox.x_headers_stored_without_reserved"):
        h = {k.lower(): v for k, v in need(entries.get("plus"), "not listed")["headers"].items()}
        require(h.get("x-campaign") == "inbox", f"stored headers {h}")
        require(all(k.startswith("x-") for k in h), f"non-X header stored: {h}")
        expect_ids(api, "/tests", {"headers[X-Campaign]": "inbox"}, [entries["plus"]["id"]])
    with r.case("inbox.plus_customer_id"):
        expect_ids(api, "/tests", {"customer_id": "cust-plus"}, [need(entries.get("plus"), "not listed")["id"]])
    with r.case("inbox.x_svc_user_guid_and_reference_id"):
        e = need(entries.get("hdr"), "not listed")
        expect_ids(api, "/tests", {"customer_id": "cust-hdr"}, [e["id"]])
        expect_ids(api, "/tests", {"reference_id": "ref-hdr"}, [e["id"]])
    with r.case("inbox.x_svc_clients"):
        plus, hdr = need(entries.get("plus"), "not listed"), need(entries.get("hdr"), "not listed")
        require(set(ok_json(api.get(f"/email/tests/{plus['id']}/results"))) == {ctx.c1}, "X-SVC-CLIENTS ignored")
        require(set(ok_json(api.get(f"/email/tests/{hdr['id']}/results"))) == {ctx.c1, ctx.c2}, "X-SVC-CLIENTS ignored")
    with r.case("inbox.content_is_html_part"):
        c = ok_json(api.get(f"/email/tests/{need(entries.get('plus'), 'not listed')['id']}/content"))["content"]
        require("Hello conformance" in c and "<p>" in c, f"content {c[:120]!r}")


# ----------------------------------------------------------------------------------------
# Area: screenshots that completed meanwhile (opportunistic: renders are never waited for)


def first_complete(api, tids, wait=120):
    """The first Complete screenshot among the tests, polling for at most `wait` seconds: the
    engines render in the background, and a slow machine must not turn this into a skip."""
    deadline = time.monotonic() + wait
    while True:
        for tid in tids:
            results = ok_json(api.get(f"/email/tests/{tid}/results", version="v5.0.1"))
            for cid, res in sorted(results.items()):
                if res["status"] == "Complete":
                    return tid, cid, res
        if time.monotonic() > deadline:
            return None
        time.sleep(0.5)


def is_image(resp):
    ctype = resp.headers.get("Content-Type", "")
    magic = resp.body[:8]
    return ctype.startswith("image/") and (magic.startswith(b"\x89PNG") or magic.startswith(b"\xff\xd8")
                                           or magic[:4] == b"RIFF" or len(resp.body) > 100)


def tampered(url):
    u = urllib.parse.urlsplit(url)
    pairs = urllib.parse.parse_qsl(u.query, keep_blank_values=True)
    flip = lambda v: (v[:-1] + ("A" if v[-1:] != "A" else "B")) if v else "A"  # noqa: E731
    return [urllib.parse.urlunsplit(u._replace(query=urllib.parse.urlencode(
        [(k, flip(v) if i == j else v) for j, (k, v) in enumerate(pairs)]))) for i in range(len(pairs))]


def check_completed_screenshots(ctx, r):
    ent = ctx.ent
    tids = [t for t in [ctx.ids.get("results_test"), ctx.ids.get("content_test")] + ctx.ids.get("ib_tests", []) if t]
    hit = {}
    with r.case("screenshots.complete_status_details_and_test_info"):
        tid, cid, res = need(first_complete(ent, tids), "no screenshot completed during the run")
        hit.update(tid=tid, cid=cid, res=res)
        d = res["status_details"]
        require(all(is_int(d.get(f)) for f in ("submitted", "completed", "attempts")), f"status_details {d}")
        require(d["completed"] >= d["submitted"] and d["attempts"] >= 1, f"status_details {d}")
        info = ok_json(ent.get(f"/email/tests/{tid}"))
        require(cid in info.get("completed", []), f"{cid} Complete but not in test info `completed`: {info}")
        require(cid not in info.get("processing", []) + info.get("bounced", []), f"{cid} listed twice: {info}")
    with r.case("screenshots.complete_urls_serve_images_presigned"):
        res = need(hit.get("res"), "no completed screenshot")
        for url in (res["screenshots"]["default"], res["thumbnail"], res["full_thumbnail"]):
            got = fetch_url(url)
            require(got.status == 200 and is_image(got), f"{url} -> {got.status} {got.headers.get('Content-Type')}")
    with r.case("screenshots.complete_url_with_basic_credentials"):
        res = need(hit.get("res"), "no completed screenshot")
        got = fetch_url(res["screenshots"]["default"], ent.auth)
        require(got.status == 200 and is_image(got), f"-> {got.status} {got.headers.get('Content-Type')}")
    with r.case("screenshots.unsigned_url_refused"):
        url = need(hit.get("res"), "no completed screenshot")["screenshots"]["default"]
        u = urllib.parse.urlsplit(url)
        need(u.query, "URL has no query string to strip")
        got = fetch_url(urllib.parse.urlunsplit(u._replace(query="")))
        require(got.status >= 400, f"unsigned URL without credentials answered {got.status}")
    with r.case("screenshots.tampered_presigned_url_refused"):
        url = need(hit.get("res"), "no completed screenshot")["screenshots"]["default"]
        variants = need(tampered(url), "URL has no query parameters")
        for v in variants:
            got = fetch_url(v)
            require(got.status >= 400, f"tampered URL {v} answered {got.status}")
    with r.case("screenshots.other_account_credentials_do_not_unlock_unsigned_url"):
        url = need(hit.get("res"), "no completed screenshot")["screenshots"]["default"]
        u = urllib.parse.urlsplit(url)
        need(u.query, "URL has no query string to strip")
        got = fetch_url(urllib.parse.urlunsplit(u._replace(query="")), ctx.intruder.auth)
        require(got.status >= 400, f"another account's credentials fetched the screenshot ({got.status})")
    with r.case("screenshots.not_served_after_delete"):
        hit2 = need(first_complete(ent, tids), "no screenshot completed during the run")  # last use of these tests
        url = hit2[2]["screenshots"]["default"]
        require(fetch_url(url).status == 200, "completed screenshot not served before delete")
        require_success(ent.delete(f"/email/tests/{hit2[0]}"))
        got = fetch_url(url)
        require(got.status >= 400, f"screenshot of a deleted test answered {got.status}")


# ----------------------------------------------------------------------------------------
# Area: rate limit


def check_rate_limit(ctx, r):
    api = ctx.accounts.get("rl")
    with r.case("errors.RateLimited.low_limit_account"):
        responses = [need(api, "no rate-limited account").get("/auth") for _ in range(12)]
        ok = [x for x in responses if x.status < 400]
        limited = [x for x in responses if x.status >= 400]
        require(responses[0].status == 200, f"first request refused: {responses[0].brief()}")
        require(limited, "12 requests within a second on a 5/minute account were all accepted")
        require(len(ok) <= 5, f"{len(ok)} requests accepted on a 5/minute account")
        for x in limited:
            expect_error(x, "RateLimited")
    with r.case("rate_limit.other_accounts_unaffected"):
        require_success(ctx.std.get("/auth"))


# ----------------------------------------------------------------------------------------
# Main


def run(binary):
    r = Report()
    workdir = tempfile.mkdtemp(prefix="mailproof-conformance-")
    server = Server(binary, workdir)
    try:
        with r.case("server.starts_and_healthz"):
            try:
                server.start()
            except StartError as e:
                raise Fail(str(e))
        if server.proc is None or server.proc.poll() is not None:
            return r
        ctx = Ctx(server)
        check_clients(ctx, r)
        setup_accounts(ctx, r)
        areas = [check_auth, check_versions, check_accept, check_not_found, check_email_creation,
                 check_bad_method, check_invalid_json, check_permissive_body, check_invalid_parameter,
                 check_transfer_encodings, check_url_source, check_results, check_reprocess, check_content,
                 check_default_clients, check_standard_plan, check_free_plan, check_restricted_plan,
                 check_reseller_plan, check_spam_on_email, check_spam_tests, check_smtp_auth, check_lists,
                 check_isolation, check_delete, check_sandbox, check_auto_inbox, check_completed_screenshots,
                 check_rate_limit]
        for area in areas:
            try:
                area(ctx, r)
            except Exception as e:  # an area aborting must not stop the others
                with r.case(f"{area.__name__}.aborted"):
                    raise e if isinstance(e, (Fail, Skip)) else Fail(f"{type(e).__name__}: {e}")
        with r.case("server.alive_after_run"):
            require(server.proc.poll() is None, f"server exited with {server.proc.returncode}")
    finally:
        was_running = server.proc is not None and server.proc.poll() is None
        rc = server.stop()
        if was_running:
            with r.case("server.sigterm_stops_it"):
                require(rc is not None, "server did not exit within 10 s of SIGTERM (killed)")
        if os.environ.get("CONFORMANCE_KEEP"):
            print(f"(kept {workdir})")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return r


def main():
    args = sys.argv[1:]
    # --strict (the test suite's mode): a case that could not run counts as failed, so nothing
    # is skipped silently because a part is missing on the machine.
    strict = "--strict" in args
    args = [a for a in args if a != "--strict"]
    binary = (args[0] if args else None) or os.environ.get("MAILPROOF_BIN") or \
        os.path.join(REPO_ROOT, "target", "debug", "mailproof")
    if not os.path.exists(binary):
        print(f"mailproof binary not found at {binary}: build it with `cargo build -p mailproof`",
              file=sys.stderr)
        return 2
    started = time.monotonic()
    report = run(os.path.abspath(binary))
    if strict and report.skipped:
        print(f"--strict: {len(report.skipped)} case(s) could not run and count as failed: "
              f"{', '.join(report.skipped)}")
        report.failed.extend(report.skipped)
        report.skipped = []
    print(f"({time.monotonic() - started:.1f} s; {len(report.skipped)} skipped)")
    print(report.summary())
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
