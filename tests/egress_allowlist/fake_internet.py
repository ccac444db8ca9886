#!/usr/bin/python3
"""A fake internet in network namespaces of its own, for the egress allowlist's tests and benchmark
(docs/network.md, "Tested against a fake internet"). Needs root; python3's standard library,
iproute2, util-linux (unshare, nsenter, mount) and openssl.

Two network namespaces, joined by a veth pair and by nothing else, so no packet can leave the
machine and the host's own interfaces, routes and /etc are never touched:

- "internet": a DNS server (UDP 53 on 198.51.100.53 and [2001:db8::53]: A and AAAA from NAMES,
  NXDOMAIN otherwise), an HTTP server on :80 and an HTTPS server on :443 on every address it holds
  (the CDN address 198.51.100.10 / 2001:db8::10, files' 198.51.100.20 / 2001:db8::20, v6only's
  2001:db8::30, and 10.0.0.5 and 169.254.169.254, so that a proxy that wrongly connected to a
  private address would be answered and seen). `/` answers with the virtual host it was asked for
  (Host header, TLS server name); `/bytes/N` with N bytes. Its route table is the veth's subnets.
- "client": 198.51.100.2/24 and 2001:db8::2/64, default routes into the veth, lo up, and a mount
  namespace of its own (propagation private) in which /etc/resolv.conf names the fake DNS and
  /etc/hosts and /etc/nsswitch.conf are replaced, so that a resolver there asks the fake DNS and
  nothing else. `psych run` is run here. A loopback trap listens on 127.0.0.1 and [::1], ports 80,
  443 and 3128: a proxy that connected to loopback on a name's behalf would be seen.

Everything the servers and the trap see is appended to one log (FakeInternet.seen()). Every
process is ended by its pid and the temp dir removed when the `with` block ends, on an exception,
SIGINT or SIGTERM; the helpers also end themselves when this process dies (their stdin closes;
PR_SET_PDEATHSIG), and their namespaces go with them.

By hand: `fake_internet.py run -- COMMAND...` runs COMMAND in the client namespace, with the CA at
$FAKE_INTERNET_CA.
"""
import contextlib
import ctypes
import http.server
import json
import os
import select
import shutil
import signal
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

PYTHON = "/usr/bin/python3"  # Debian's: a pyenv shim is not what root finds in a namespace
HERE = os.path.abspath(__file__)
SUFFIX = "fake-internet.test"

# name -> (IPv4 addresses, IPv6 addresses). api and cdn-other share one address: a CDN.
NAMES = {
    f"api.{SUFFIX}": (["198.51.100.10"], ["2001:db8::10"]),
    f"cdn-other.{SUFFIX}": (["198.51.100.10"], ["2001:db8::10"]),
    f"files.{SUFFIX}": (["198.51.100.20"], ["2001:db8::20"]),
    f"v6only.{SUFFIX}": ([], ["2001:db8::30"]),
    f"rebind.{SUFFIX}": (["127.0.0.1"], []),
    f"rebind6.{SUFFIX}": ([], ["::1"]),
    f"private.{SUFFIX}": (["10.0.0.5"], []),
    f"metadata.{SUFFIX}": (["169.254.169.254"], []),
}
CLIENT_V4, CLIENT_V6 = "198.51.100.2", "2001:db8::2"
GATEWAY_V4, GATEWAY_V6 = "198.51.100.1", "2001:db8::1"
DNS_V4, DNS_V6 = "198.51.100.53", "2001:db8::53"
# Held by the internet's end of the veth, beside the gateway addresses.
INTERNET_V4 = ["198.51.100.10", "198.51.100.20", DNS_V4]
INTERNET_V6 = ["2001:db8::10", "2001:db8::20", "2001:db8::30", DNS_V6]
# Private and link-local addresses the internet answers on too, reached by the client's default route.
INTERNET_HOST_ROUTES = ["10.0.0.5", "169.254.169.254"]
TRAP_PORTS = (80, 443, 3128)
BYTES_LIMIT = 64 << 20
READY_SECONDS = 15

PR_SET_PDEATHSIG = 1


def _die_with_parent(sig=signal.SIGKILL):
    """preexec_fn: the kernel signals the child when this process ends, however it ends."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)


def _run(argv, **kwargs):
    """A setup command; a failure names the command and what it printed."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip() or done.stdout.strip()}")
    return done


def _read_line(process, seconds, what):
    """The helper's first line ("ready"), or why it did not come."""
    ready, _, _ = select.select([process.stdout], [], [], seconds)
    line = process.stdout.readline() if ready else ""
    if line.strip() != "ready":
        process.poll()
        raise RuntimeError(f"{what} did not start (exit {process.returncode}): {line.strip()}")


class FakeInternet:
    """The two namespaces, their servers and the log of what they saw. Use as a context manager."""

    def __init__(self):
        self.dir = None
        self.ca_pem = None
        self._helpers = []  # (what, Popen), ended in reverse order
        self._client_pid = None
        self._old_handlers = {}

    # -- life ---------------------------------------------------------------------------------

    def __enter__(self):
        if os.geteuid() != 0:
            raise PermissionError("the fake internet needs root (network namespaces, veth, mounts)")
        self._catch_signals()
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _catch_signals(self):
        """SIGTERM and SIGHUP end the `with` block as SIGINT does, so close() runs."""
        if threading.current_thread() is not threading.main_thread():
            return

        def leave(signum, _frame):
            raise SystemExit(128 + signum)

        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, leave)

    def close(self):
        """Ends every helper by pid (their namespaces go with them) and removes the temp dir."""
        blocked = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            for _what, process in reversed(self._helpers):
                with contextlib.suppress(OSError):
                    process.stdin.close()  # each helper ends itself at the end of its stdin
            for _what, process in reversed(self._helpers):
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                with contextlib.suppress(OSError):
                    process.stdout.close()
            self._helpers.clear()
            if self.dir:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None
        finally:
            for sig, handler in self._old_handlers.items():
                signal.signal(sig, handler)
            self._old_handlers.clear()
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)

    def _spawn(self, what, argv, death_signal=signal.SIGKILL):
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                   preexec_fn=lambda: _die_with_parent(death_signal), close_fds=True)
        self._helpers.append((what, process))
        return process

    def _start(self):
        self.dir = tempfile.mkdtemp(prefix="fake-internet-")
        os.chmod(self.dir, 0o755)
        self._make_certificates()
        with open(os.path.join(self.dir, "names.json"), "w", encoding="utf-8") as out:
            json.dump(NAMES, out)
        open(self.log_path, "w").close()
        self._write_etc()

        # The internet: its servers, in a network namespace of their own (unshare execs python,
        # so the Popen's pid is the namespace's first process).
        internet = self._spawn("internet", ["unshare", "--net", "--", PYTHON, HERE, "internet-side", self.dir],
                               death_signal=signal.SIGTERM)
        # The client: a holder whose stdin keeps it (and its network and mount namespaces) alive.
        holder = self._spawn("client holder", ["unshare", "--net", "--mount", "--propagation", "private", "--",
                                               PYTHON, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"])
        _read_line(holder, READY_SECONDS, "the client namespace's holder")
        self._client_pid = holder.pid
        self._wire(internet.pid)
        self._mount_etc()
        internet.stdin.write("go\n")
        internet.stdin.flush()
        _read_line(internet, READY_SECONDS, "the internet's servers")
        trap = self._spawn("loopback trap", self.client_argv([PYTHON, HERE, "loopback-trap", self.dir], mount=False))
        _read_line(trap, READY_SECONDS, "the client's loopback trap")

    def _make_certificates(self):
        """A CA and one server certificate whose SANs are every fake name and address (as a CDN's)."""
        d = self.dir
        _run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
              "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem", "-days", "2", "-subj", "/CN=psych fake internet CA",
              "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
              "-addext", "subjectKeyIdentifier=hash"])
        _run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
              "-keyout", f"{d}/server.key", "-out", f"{d}/server.csr", "-subj", f"/CN=api.{SUFFIX}"])
        sans = [f"DNS:{name}" for name in NAMES] + [
            f"IP:{a}" for a in INTERNET_V4 + INTERNET_V6 + INTERNET_HOST_ROUTES]
        with open(f"{d}/server.ext", "w", encoding="utf-8") as ext:
            ext.write("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                      "extendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\n"
                      "authorityKeyIdentifier=keyid,issuer\n" f"subjectAltName={','.join(sans)}\n")
        _run(["openssl", "x509", "-req", "-in", f"{d}/server.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca.key",
              "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-days", "2", "-out", f"{d}/server.pem",
              "-extfile", f"{d}/server.ext"])
        with open(f"{d}/ca.pem", encoding="ascii") as pem:
            self.ca_pem = pem.read()

    def _write_etc(self):
        """What the client's /etc shows of name resolution: the fake DNS and nothing else."""
        etc = os.path.join(self.dir, "etc")
        os.mkdir(etc)
        with open(f"{etc}/resolv.conf", "w", encoding="ascii") as out:
            out.write(f"nameserver {DNS_V4}\noptions timeout:1 attempts:1\n")
        with open(f"{etc}/hosts", "w", encoding="ascii") as out:
            out.write("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")
        # The host's file with its hosts line replaced: users and groups still resolve as on the host.
        lines = []
        with open("/etc/nsswitch.conf", encoding="utf-8") as host_file:
            for line in host_file:
                if not line.lstrip().startswith("hosts:"):
                    lines.append(line)
        lines.append("hosts: files dns\n")
        with open(f"{etc}/nsswitch.conf", "w", encoding="utf-8") as out:
            out.writelines(lines)

    def _mount_etc(self):
        for name in ("resolv.conf", "hosts", "nsswitch.conf"):
            _run(self.client_argv(["mount", "--bind", os.path.join(self.dir, "etc", name), f"/etc/{name}"]))

    def _wire(self, internet_pid):
        """The veth pair, made from inside the client namespace with its peer put straight into the
        internet's: at no moment is an interface in the host's namespace."""
        client = lambda *argv: _run(self.client_argv(list(argv), mount=False))  # noqa: E731
        internet = lambda *argv: _run(["nsenter", "-t", str(internet_pid), "-n", "--", *argv])  # noqa: E731
        for run in (client, internet):
            # No duplicate address detection: addresses usable at once. /proc/sys/net is the namespace's own.
            run("sh", "-c", "echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad; "
                            "echo 0 > /proc/sys/net/ipv6/conf/all/accept_dad")
        client("ip", "link", "add", "fi-client", "type", "veth", "peer", "name", "fi-internet",
               "netns", str(internet_pid))
        client("ip", "link", "set", "lo", "up")
        client("ip", "link", "set", "fi-client", "up")
        client("ip", "addr", "add", f"{CLIENT_V4}/24", "dev", "fi-client")
        client("ip", "-6", "addr", "add", f"{CLIENT_V6}/64", "dev", "fi-client", "nodad")
        internet("ip", "link", "set", "lo", "up")
        internet("ip", "link", "set", "fi-internet", "up")
        internet("ip", "addr", "add", f"{GATEWAY_V4}/24", "dev", "fi-internet")
        internet("ip", "-6", "addr", "add", f"{GATEWAY_V6}/64", "dev", "fi-internet", "nodad")
        for address in INTERNET_V4:
            internet("ip", "addr", "add", f"{address}/24", "dev", "fi-internet")
        for address in INTERNET_V6:
            internet("ip", "-6", "addr", "add", f"{address}/64", "dev", "fi-internet", "nodad")
        for address in INTERNET_HOST_ROUTES:
            internet("ip", "addr", "add", f"{address}/32", "dev", "fi-internet")
        client("ip", "route", "add", "default", "via", GATEWAY_V4, "dev", "fi-client")
        client("ip", "-6", "route", "add", "default", "via", GATEWAY_V6, "dev", "fi-client")

    # -- use ----------------------------------------------------------------------------------

    @property
    def log_path(self):
        return os.path.join(self.dir, "seen.jsonl")

    def client_argv(self, argv, mount=True):
        """argv run inside the client's network (and mount) namespace."""
        return ["nsenter", "-t", str(self._client_pid), "-n", *(["-m"] if mount else []), "--", *argv]

    def run(self, argv, env=None, timeout=60, input=None):
        """argv in the client namespace; its output captured. A pid of ours, ended if we are."""
        return subprocess.run(self.client_argv(argv), env=env, input=input, capture_output=True, text=True,
                              timeout=timeout, preexec_fn=lambda: _die_with_parent(signal.SIGTERM))

    def start(self, argv):
        """argv started in the client namespace, in the background, quiet; a pid of ours, ended (with
        SIGTERM) if we are. The caller ends it by that pid."""
        return subprocess.Popen(self.client_argv(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, close_fds=True,
                                preexec_fn=lambda: _die_with_parent(signal.SIGTERM))

    def mark(self):
        """A point in the log; seen(mark) is what came after it."""
        return os.path.getsize(self.log_path)

    def seen(self, since=0, settle=0.3):
        """What the servers and the trap saw since `since`: dicts with "who" (dns, http, https, trap),
        "event" and its details. `settle`: a server thread may log just after its client is done."""
        time.sleep(settle)
        with open(self.log_path, "rb") as log:
            log.seek(since)
            return [json.loads(line) for line in log.read().splitlines() if line.strip()]


# -- the servers (the internet namespace) and the trap (the client's loopback) -------------------


class _Log:
    """One JSON line per event, appended with one write each (the trap writes to the same file)."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND)

    def __call__(self, who, event, **details):
        os.write(self.fd, (json.dumps({"t": time.time(), "who": who, "event": event, **details}) + "\n").encode())


def _host(address):
    return address[0].removeprefix("::ffff:")


class _DualStackServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    address_family = socket.AF_INET6
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


class _VirtualHost(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-internet"
    sys_version = ""
    chunk = b"x" * (1 << 20)

    def log_message(self, *args):
        pass

    def do_GET(self):
        scheme = self.server.scheme
        sni = getattr(self.connection, "fake_sni", None)
        host = (self.headers.get("Host") or "").lower()
        self.server.log(scheme, "request", peer=_host(self.client_address), local=self.connection.getsockname()[0],
                        host=host, sni=sni, path=self.path)
        if self.path.startswith("/bytes/"):
            count = min(int(self.path[len("/bytes/"):] or 0), BYTES_LIMIT)
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(count))
            self.end_headers()
            while count:
                piece = self.chunk[:min(count, len(self.chunk))]
                self.wfile.write(piece)
                count -= len(piece)
            return
        body = f"fake-internet {scheme} host={host or '-'} sni={sni or '-'} path={self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _HTTPServer(_DualStackServer):
    scheme = "http"

    def __init__(self, log):
        self.log = log
        super().__init__(("::", 80), _VirtualHost)

    def finish_request(self, request, client_address):
        self.log("http", "accept", peer=_host(client_address), local=request.getsockname()[0])
        super().finish_request(request, client_address)


class _HTTPSServer(_DualStackServer):
    """Accepts TCP, notes whether a ClientHello came at all, then TLS with the SNI noted."""
    scheme = "https"

    def __init__(self, log, directory):
        self.log = log
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(f"{directory}/server.pem", f"{directory}/server.key")
        self.context.sni_callback = self._on_sni
        super().__init__(("::", 443), _VirtualHost)

    def _on_sni(self, tls_socket, server_name, _context):
        tls_socket.fake_sni = server_name
        self.log("https", "client_hello", peer=_host(tls_socket.getpeername()), sni=server_name)

    def finish_request(self, request, client_address):
        peer = _host(client_address)
        self.log("https", "accept", peer=peer, local=request.getsockname()[0])
        request.settimeout(10)
        try:
            first = request.recv(1, socket.MSG_PEEK)
        except OSError as error:
            first, reason = b"", str(error)
        else:
            reason = "end of stream"
        if not first:
            self.log("https", "closed_before_any_byte", peer=peer, reason=reason)
            return
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError) as error:
            self.log("https", "handshake_failed", peer=peer, error=str(error))
            return
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            with contextlib.suppress(OSError):
                tls.close()


def _dns_answer(query, names, log, peer):
    """The answer to one query: A/AAAA from `names`, NODATA for another type, NXDOMAIN otherwise."""
    if len(query) < 12:
        return None
    ident, flags, qdcount = struct.unpack("!HHH", query[:6])
    if qdcount != 1 or flags & 0x8000:
        return None
    labels, at = [], 12
    while at < len(query) and query[at]:
        length = query[at]
        labels.append(query[at + 1:at + 1 + length].decode("ascii", "replace"))
        at += 1 + length
    if at + 5 > len(query):
        return None
    qtype, qclass = struct.unpack("!HH", query[at + 1:at + 5])
    question = query[12:at + 5]
    name = ".".join(labels).lower()
    log("dns", "query", peer=peer, name=name, type={1: "A", 28: "AAAA"}.get(qtype, str(qtype)))
    records = []
    if name in names and qclass == 1:
        v4, v6 = names[name]
        if qtype == 1:
            records = [socket.inet_pton(socket.AF_INET, a) for a in v4]
        elif qtype == 28:
            records = [socket.inet_pton(socket.AF_INET6, a) for a in v6]
    rcode = 0 if name in names else 3
    header = struct.pack("!HHHHHH", ident, 0x8400 | (flags & 0x0100) | 0x0080 | rcode, 1, len(records), 0, 0)
    answers = b"".join(struct.pack("!HHHIH", 0xC00C, qtype, 1, 5, len(r)) + r for r in records)
    return header + question + answers


def _serve_dns(address, family, names, log):
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.bind((address, 53))

    def loop():
        while True:
            query, peer = sock.recvfrom(4096)
            answer = _dns_answer(query, names, log, _host(peer))
            if answer:
                sock.sendto(answer, peer)

    threading.Thread(target=loop, daemon=True).start()


def _until_stdin_ends():
    """Helpers end when the test's end of their stdin closes: at its close(), or its death."""
    sys.stdin.read()


def internet_side(directory):
    """The internet namespace's servers, started once the veth holds their addresses ("go"). At
    its end it removes the temp dir too, for a test that was SIGKILLed (SIGTERM is its parent's death)."""
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))
    try:
        _serve_internet(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _serve_internet(directory):
    if sys.stdin.readline().strip() != "go":
        return
    log = _Log(os.path.join(directory, "seen.jsonl"))
    with open(os.path.join(directory, "names.json"), encoding="utf-8") as source:
        names = {name: tuple(v) for name, v in json.load(source).items()}
    _serve_dns(DNS_V4, socket.AF_INET, names, log)
    _serve_dns(DNS_V6, socket.AF_INET6, names, log)
    for server in (_HTTPServer(log), _HTTPSServer(log, directory)):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    print("ready", flush=True)
    _until_stdin_ends()


def loopback_trap(directory):
    """The client namespace's loopback, watched: a proxy must never connect here for a name."""
    log = _Log(os.path.join(directory, "seen.jsonl"))
    listeners = []
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        for port in TRAP_PORTS:
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, port))
            sock.listen(16)
            listeners.append(sock)

    def watch(sock):
        while True:
            connection, peer = sock.accept()
            log("trap", "accept", peer=_host(peer), local=f"{sock.getsockname()[0]}:{sock.getsockname()[1]}")
            connection.close()

    for sock in listeners:
        threading.Thread(target=watch, args=(sock,), daemon=True).start()
    print("ready", flush=True)
    _until_stdin_ends()


def main(argv):
    if len(argv) >= 2 and argv[0] == "internet-side":
        internet_side(argv[1])
        return 0
    if len(argv) >= 2 and argv[0] == "loopback-trap":
        loopback_trap(argv[1])
        return 0
    if len(argv) >= 2 and argv[0] == "run" and argv[1] == "--":
        with FakeInternet() as net:
            ca = os.path.join(net.dir, "ca.pem")
            done = subprocess.run(net.client_argv(argv[2:]), env={**os.environ, "FAKE_INTERNET_CA": ca})
            for entry in net.seen():
                print(json.dumps(entry), file=sys.stderr)
            return done.returncode
    print(f"usage: {sys.argv[0]} run -- COMMAND...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
