#!/usr/bin/python3
"""A 1 MiB HTTPS fetch through psych's egress proxy beside the same fetch made directly, in the fake
internet of tests/egress_allowlist (docs/network.md, "Tested against a fake internet"). As root:

    benchmarks/egress_proxy_bench.py PSYCH [--rounds N] [--fetches N] [--check]

Each round runs one client program twice, side by side: directly in the fake internet's client
namespace (no proxy, no sandbox: /usr/bin/python3), and sandboxed by `psych run --isolation isolated
--allow-host files.fake-internet.test`, through the proxy. The program times its own fetches
(urllib.request, a new connection and TLS handshake each, the CA given inline), after a warm-up
fetch, so psych's start is not measured. The figures are the medians over every round's fetches.

Prints "BENCH name value unit" lines; with --check it exits 1 when the ratio misses its target (1.2x).
Not as root it is skipped (exit 77); CI runs it as root, where a fake internet that cannot be made fails.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "egress_allowlist"))
from fake_internet import PYTHON, SUFFIX, FakeInternet  # noqa: E402
sys.path[0] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support")
from script_skips import log_skip  # noqa: E402

HOST = f"files.{SUFFIX}"
SIZE = 1 << 20
TARGET = 1.2

# The client, run as is by both contenders; FETCHES and CA are filled in. urllib takes the proxy
# from the environment psych gives the program, and goes direct where there is none.
CLIENT = r'''
import ssl, time, urllib.request
CA = """CA_PEM"""
context = ssl.create_default_context(cadata=CA)

def fetch():
    with urllib.request.urlopen("https://HOST/bytes/SIZE", context=context, timeout=30) as answer:
        if len(answer.read()) != SIZE:
            raise RuntimeError("short body")

fetch()  # the warm-up: imports, the first handshake's caches
seconds = []
for _ in range(FETCHES):
    started = time.perf_counter()
    fetch()
    seconds.append(time.perf_counter() - started)
'''


def client_text(ca_pem, fetches):
    return (CLIENT.replace("CA_PEM", ca_pem).replace("HOST", HOST).replace("SIZE", str(SIZE))
            .replace("FETCHES", str(fetches)))


def direct(net, text):
    """The client in the client namespace, without a proxy or a sandbox: its fetches' seconds."""
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    done = net.run([PYTHON, "-c", text + "import json\nprint(json.dumps(seconds))\n"], env=env, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"the direct client failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def proxied(net, psych, text, fetches):
    """The client sandboxed by psych, through the proxy: its fetches' seconds, and the egress meters."""
    path = os.path.join(net.dir, "bench_client.py")
    with open(path, "w", encoding="utf-8") as out:
        out.write(text + "seconds\n")
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    done = net.run([psych, "run", "--isolation", "isolated", "--allow-host", HOST, "--json", "--no-stream",
                    "--wall-seconds", "110", path], env=env, timeout=150)
    try:
        result = json.loads(done.stdout)
    except ValueError:
        raise RuntimeError(f"psych run printed no JSON (exit {done.returncode}): {done.stderr[-2000:]}")
    if done.returncode != 0 or not isinstance(result.get("value"), list):
        raise RuntimeError(f"psych run exited {done.returncode}: "
                           f"{json.dumps({k: result.get(k) for k in ('value', 'failure', 'problems')})[:2000]}")
    egress = result.get("egress") or {}
    if egress.get("connections_allowed") != fetches + 1 or egress.get("bytes_received", 0) < (fetches + 1) * SIZE:
        raise RuntimeError(f"the proxy did not carry every fetch: {egress}")
    if (result.get("guarantees") or {}).get("network") != "enforced":
        raise RuntimeError(f"guarantees.network: {result.get('guarantees')}")
    return result["value"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("psych")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fetches", type=int, default=9, help="timed fetches per contender per round")
    parser.add_argument("--check", action="store_true", help="exit 1 when the ratio is over its target")
    args = parser.parse_args()
    args.psych = os.path.abspath(args.psych)  # nsenter -m starts in /: a relative path is lost
    if os.geteuid() != 0:
        reason = "needs root: network namespaces, a veth pair and bind mounts make the fake internet"
        print(f"SKIP: {reason}")
        log_skip("egress_proxy_bench", "egress_allowlist.bench_smoke", reason)
        return 77
    with FakeInternet() as net:
        text = client_text(net.ca_pem, args.fetches)
        times = {"direct": [], "proxy": []}
        for _ in range(args.rounds):
            times["direct"] += direct(net, text)
            times["proxy"] += proxied(net, args.psych, text, args.fetches)
    direct_ms = statistics.median(times["direct"]) * 1e3
    proxy_ms = statistics.median(times["proxy"]) * 1e3
    ratio = proxy_ms / direct_ms
    fetches = len(times["direct"])
    print(f"BENCH egress_https_1mib_direct {direct_ms:.2f} ms (median of {fetches})")
    print(f"BENCH egress_https_1mib_proxy {proxy_ms:.2f} ms (median of {fetches})")
    print(f"BENCH egress_https_1mib_ratio {ratio:.3f} x (target <= {TARGET})")
    return 1 if args.check and ratio > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
