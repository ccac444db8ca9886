#!/usr/bin/python3
"""A 1 MiB HTTPS fetch through psych's egress proxy beside the same fetch made directly, in the fake
internet of tests/egress_allowlist (docs/network.md, "Tested against a fake internet"). As root:

    benchmarks/egress_proxy_bench.py PSYCH [--rounds N] [--fetches N] [--check]

Each round runs one client program under each contender, side by side (in turn, the order reversed
every other round):
- direct: in the fake internet's client namespace, no proxy, no sandbox (/usr/bin/python3);
- relay: the same, through HAProxy as a plain TCP relay to the server's address (mode tcp, kernel
  splicing; it connects with no name to resolve, no request to read): what any hop in user space
  adds on this machine, the floor under a proxy's figure. Left out, said so, without haproxy;
- proxy: sandboxed by `psych run --isolation isolated --allow-host files.fake-internet.test`,
  through psych's proxy.
The program times its own fetches (urllib.request, a new connection and TLS handshake each, the CA
given inline), after a warm-up fetch, so psych's start is not measured.

The figures are medians over every round's fetches; a ratio is the median of the rounds' own ratios
(each contender's median in a round over direct's in that round), so that a machine that slows
between rounds moves both sides of a ratio alike. The proxy over the relay, in the same rounds, is
what psych adds to a hop of its own.

Prints "BENCH name value unit" lines; with --check it exits 1 when the proxy's ratio misses its
target (1.2x). Not as root it is skipped (exit 77); CI runs it as root, where a fake internet that
cannot be made fails.
"""
import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "egress_allowlist"))
from fake_internet import NAMES, PYTHON, SUFFIX, FakeInternet  # noqa: E402
sys.path[0] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support")
from script_skips import log_skip  # noqa: E402

HOST = f"files.{SUFFIX}"
SIZE = 1 << 20
TARGET = 1.2
RELAY_PORT = 3300  # in the client namespace, where nothing else listens on it

# The client, run as is by every contender; CA, RELAY and FETCHES are filled in. urllib takes the
# proxy from the environment psych gives the program, and goes direct where there is none; with
# RELAY it connects to the relay instead of the server's address, and speaks TLS to the server as
# it would directly.
CLIENT = r'''
import http.client, socket, ssl, time, urllib.request
CA = """CA_PEM"""
RELAY = RELAY_ADDRESS
context = ssl.create_default_context(cadata=CA)

class Relayed(http.client.HTTPSConnection):
    """The stock connection, its socket connected to the relay instead of the server's address."""
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._create_connection = lambda _address, *rest: socket.create_connection(RELAY, *rest)

class ThroughRelay(urllib.request.HTTPSHandler):
    def https_open(self, request):
        return self.do_open(Relayed, request, context=context)

# One opener, built once, for every contender (urlopen(context=...) would build one a fetch).
opener = urllib.request.build_opener(ThroughRelay(context=context) if RELAY else
                                     urllib.request.HTTPSHandler(context=context))

def fetch():
    with opener.open("https://HOST/bytes/SIZE", timeout=30) as answer:
        if len(answer.read()) != SIZE:
            raise RuntimeError("short body")

started = time.perf_counter()
fetch()  # the first: psych's proxy resolves the name (later ones reuse its answer), Python warms up
first = time.perf_counter() - started
seconds = []
for _ in range(FETCHES):
    started = time.perf_counter()
    fetch()
    seconds.append(time.perf_counter() - started)
'''


def client_text(ca_pem, fetches, relay=None):
    return (CLIENT.replace("CA_PEM", ca_pem).replace("RELAY_ADDRESS", repr(relay)).replace("HOST", HOST)
            .replace("SIZE", str(SIZE)).replace("FETCHES", str(fetches)))


def without_proxies():
    return {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}


def unsandboxed(net, text):
    """The client in the client namespace, without psych's proxy or a sandbox: its fetches' seconds."""
    done = net.run([PYTHON, "-c", text + "import json\nprint(json.dumps({'first': first, 'seconds': seconds}))\n"],
                   env=without_proxies(), timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"the client failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def proxied(net, psych, text, fetches):
    """The client sandboxed by psych, through the proxy: its fetches' seconds, and the egress meters."""
    path = os.path.join(net.dir, "bench_client.py")
    with open(path, "w", encoding="utf-8") as out:
        out.write(text + "{'first': first, 'seconds': seconds}\n")
    done = net.run([psych, "run", "--isolation", "isolated", "--allow-host", HOST, "--json", "--no-stream",
                    "--wall-seconds", "110", path], env=without_proxies(), timeout=150)
    try:
        result = json.loads(done.stdout)
    except ValueError:
        raise RuntimeError(f"psych run printed no JSON (exit {done.returncode}): {done.stderr[-2000:]}")
    if done.returncode != 0 or not isinstance(result.get("value"), dict):
        raise RuntimeError(f"psych run exited {done.returncode}: "
                           f"{json.dumps({k: result.get(k) for k in ('value', 'failure', 'problems')})[:2000]}")
    egress = result.get("egress") or {}
    if egress.get("connections_allowed") != fetches + 1 or egress.get("bytes_received", 0) < (fetches + 1) * SIZE:
        raise RuntimeError(f"the proxy did not carry every fetch: {egress}")
    if (result.get("guarantees") or {}).get("network") != "enforced":
        raise RuntimeError(f"guarantees.network: {result.get('guarantees')}")
    return result["value"]


READY = """
import socket, sys, time
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()
        break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit(1)
"""


@contextlib.contextmanager
def tcp_relay(net):
    """HAProxy in the client namespace, relaying 127.0.0.1:RELAY_PORT to the server's address: the
    address to connect to, or None where there is no haproxy. Ended by its pid."""
    haproxy = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")
    if not haproxy:
        yield None
        return
    config = os.path.join(net.dir, "relay.cfg")
    with open(config, "w", encoding="utf-8") as out:
        out.write("global\n  maxconn 64\n"
                  "defaults\n  mode tcp\n  option splice-auto\n"
                  "  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n"
                  f"listen relay\n  bind 127.0.0.1:{RELAY_PORT}\n  server files {NAMES[HOST][0][0]}:443\n")
    relay = net.start([haproxy, "-f", config, "-db"])
    try:
        ready = net.run([PYTHON, "-c", READY, str(RELAY_PORT)])
        if ready.returncode != 0 or relay.poll() is not None:
            raise RuntimeError(f"HAProxy did not listen on 127.0.0.1:{RELAY_PORT} (exit {relay.poll()})")
        yield ("127.0.0.1", RELAY_PORT)
    finally:
        relay.terminate()
        try:
            relay.wait(timeout=5)
        except subprocess.TimeoutExpired:
            relay.kill()
            relay.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("psych")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fetches", type=int, default=9, help="timed fetches per contender per round")
    parser.add_argument("--check", action="store_true", help="exit 1 when the proxy's ratio is over its target")
    args = parser.parse_args()
    args.psych = os.path.abspath(args.psych)  # nsenter -m starts in /: a relative path is lost
    if os.geteuid() != 0:
        reason = "needs root: network namespaces, a veth pair and bind mounts make the fake internet"
        print(f"SKIP: {reason}")
        log_skip("egress_proxy_bench", "egress_allowlist.bench_smoke", reason)
        return 77
    with FakeInternet() as net, tcp_relay(net) as relay:
        text = client_text(net.ca_pem, args.fetches)
        contenders = {"direct": lambda: unsandboxed(net, text),
                      "proxy": lambda: proxied(net, args.psych, text, args.fetches)}
        if relay:
            contenders["relay"] = lambda: unsandboxed(net, client_text(net.ca_pem, args.fetches, relay))
        else:
            print("NOTE: no haproxy on PATH or in /usr/sbin: the relay's floor is not measured")
        times = {name: [] for name in contenders}
        ratios = {name: [] for name in contenders if name != "direct"}
        first_ratios = []  # the proxy's first fetch over direct's, a round each
        over_relay = []  # the proxy's median over the relay's, a round each: what psych adds to any hop
        for round_number in range(args.rounds):
            order = list(contenders) if round_number % 2 == 0 else list(reversed(contenders))
            this_round = {name: contenders[name]() for name in order}
            for name, fetched in this_round.items():
                times[name] += fetched["seconds"]
            medians = {name: statistics.median(fetched["seconds"]) for name, fetched in this_round.items()}
            for name, of_name in ratios.items():
                of_name.append(medians[name] / medians["direct"])
            first_ratios.append(this_round["proxy"]["first"] / this_round["direct"]["first"])
            if relay:
                over_relay.append(medians["proxy"] / medians["relay"])
    fetches = len(times["direct"])
    for name in ("direct", "relay", "proxy"):
        if name in times:
            print(f"BENCH egress_https_1mib_{name} {statistics.median(times[name]) * 1e3:.2f} ms (median of {fetches})")
    if "relay" in ratios:
        print(f"BENCH egress_https_1mib_relay_ratio {statistics.median(ratios['relay']):.3f} x "
              f"(HAProxy's TCP relay, the floor; median of {args.rounds} rounds)")
        print(f"BENCH egress_https_1mib_over_relay {statistics.median(over_relay):.3f} x "
              f"(psych's proxy over HAProxy's relay: what psych adds to a hop; median of {args.rounds} rounds)")
    print(f"BENCH egress_https_1mib_first_ratio {statistics.median(first_ratios):.3f} x "
          f"(each program's first fetch: the proxy resolves the name; median of {args.rounds} rounds)")
    ratio = statistics.median(ratios["proxy"])
    print(f"BENCH egress_https_1mib_ratio {ratio:.3f} x (target <= {TARGET}; median of {args.rounds} rounds)")
    return 1 if args.check and ratio > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
