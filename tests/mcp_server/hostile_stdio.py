#!/usr/bin/env python3
"""Hostile clients of `psych mcp` over stdio (docs/mcp-server.md, "Bounds"). Each case starts psych
mcp, misbehaves, and checks that the answer is a named error, that psych's peak memory (VmHWM)
stays bounded, and that it still serves a well-behaved request afterwards.

    hostile_stdio.py CASE PSYCH        CASE: huge_line flood garbage never_reads stranger_cancel
"""
import fcntl
import json
import os
import select
import subprocess
import sys
import time

MEMORY_BOUND = 96 << 20  # psych mcp's own peak: its runtime, a 16 MiB message bound, an 8 MiB outbox
failures = 0


def check(condition, what, detail=None):
    global failures
    if condition:
        print(f"ok: {what}")
    else:
        failures += 1
        print(f"FAILED: {what}" + (f"\n  {detail}" if detail is not None else ""))


class server:
    def __init__(self, psych, *args):
        self.process = subprocess.Popen([psych, "mcp", "--pool", "0", *args], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, bufsize=0)
        self.pending = b""
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                   "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "hostile", "version": "1"}}})
        assert self.wait_for(lambda m: m.get("id") == "init"), "psych mcp did not answer initialize"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.process.stdin.write((json.dumps(message) + "\n").encode())

    def messages(self, timeout):
        """The messages that arrive within `timeout` seconds of quiet."""
        out = []
        while True:
            ready, _, _ = select.select([self.process.stdout], [], [], timeout)
            if not ready:
                return out
            chunk = os.read(self.process.stdout.fileno(), 1 << 20)
            if not chunk:
                return out
            self.pending += chunk
            *lines, self.pending = self.pending.split(b"\n")
            out.extend(json.loads(line) for line in lines if line.strip())

    def wait_for(self, wanted, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in self.messages(0.2):
                if wanted(message):
                    return message
        return None

    def send_and_read_all(self, outgoing, sent, count, seconds):
        """Writes the rest of `outgoing` (from byte `sent`, stdin non-blocking) while reading every
        answer, until `count` are answered or `seconds` pass; stdin is blocking again after. The ids
        answered."""
        answered = set()
        deadline = time.monotonic() + seconds
        while (sent < len(outgoing) or len(answered) < count) and time.monotonic() < deadline:
            if sent < len(outgoing):
                try:
                    sent += os.write(self.process.stdin.fileno(), outgoing[sent:sent + (1 << 16)])
                except BlockingIOError:
                    pass
            for message in self.messages(0.01):
                if "result" in message:
                    answered.add(message["id"])
        fcntl.fcntl(self.process.stdin, fcntl.F_SETFL, 0)
        return answered

    def peak_memory(self):
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return 0

    def still_serves(self):
        self.send({"jsonrpc": "2.0", "id": "after", "method": "tools/call",
                   "params": {"name": "run_code", "arguments": {"program": "return 6 * 7"}}})
        answer = self.wait_for(lambda m: m.get("id") == "after")
        check(answer is not None and answer["result"]["structuredContent"] == {"value": 42},
              "it still serves a well-behaved call", answer)

    def close(self):
        self.process.stdin.close()
        try:
            code = self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        check(code == 0, "psych mcp ends cleanly when its input closes", code)


def huge_line(psych):
    s = server(psych)
    # 1 GiB in one line, written while psych reads it; psych must refuse it without holding it.
    s.process.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"')
    block = b"x" * (1 << 20)
    began = time.monotonic()
    for _ in range(1024):
        s.process.stdin.write(block)
    s.process.stdin.write(b'"}}\n')
    took = time.monotonic() - began
    answer = s.wait_for(lambda m: "error" in m and m.get("id") is None)
    check(answer is not None and "request_too_large" in answer["error"]["message"],
          f"a 1 GiB line is refused by name (streamed in {took:.1f} s)", answer)
    peak = s.peak_memory()
    check(peak < MEMORY_BOUND, f"psych's peak memory stayed at {peak >> 20} MiB while it streamed past", peak)
    s.still_serves()
    s.close()


def flood(psych):
    s = server(psych)
    count = 20000
    fcntl.fcntl(s.process.stdin, fcntl.F_SETFL, os.O_NONBLOCK)
    outgoing = b"".join((json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}) + "\n").encode()
                        for i in range(count))
    answered = s.send_and_read_all(outgoing, 0, count, seconds=60)
    check(len(answered) == count, f"every one of {count} pings sent at once is answered", len(answered))
    peak = s.peak_memory()
    check(peak < MEMORY_BOUND, f"psych's peak memory stayed at {peak >> 20} MiB", peak)
    s.still_serves()
    s.close()


def garbage(psych):
    s = server(psych)
    for line in [b"not json at all", b'{"jsonrpc":"2.0","id":', b"\x00\xff\xfe", b"[1,2,3]", b'{"jsonrpc":"1.0","id":5,"method":"ping"}',
                 b'{"jsonrpc":"2.0","id":{"nested":1},"method":"ping"}', b'"just a string"']:
        s.process.stdin.write(line + b"\n")
    errors = [m for m in s.messages(1.0) if "error" in m]
    codes = sorted(m["error"]["code"] for m in errors)
    check(len(errors) == 7, "each of 7 garbage lines gets a JSON-RPC error", errors)
    check(codes.count(-32700) == 3 and codes.count(-32600) == 4, "parse errors -32700, invalid requests -32600", codes)
    check(all(m["error"]["message"] for m in errors), "each names what was wrong", errors)
    s.still_serves()
    s.close()


def never_reads(psych):
    s = server(psych)
    # tools/list answers are a few KB each: 20,000 of them unread are far past the 8 MiB outbox.
    fcntl.fcntl(s.process.stdin, fcntl.F_SETFL, os.O_NONBLOCK)
    count, sent_messages = 20000, 0
    outgoing = b"".join((json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/list"}) + "\n").encode()
                        for i in range(count))
    sent = 0
    stalled_at = None
    deadline = time.monotonic() + 20
    while sent < len(outgoing) and time.monotonic() < deadline:
        try:
            sent += os.write(s.process.stdin.fileno(), outgoing[sent:sent + (1 << 16)])
            stalled_at = None
        except BlockingIOError:
            stalled_at = stalled_at or time.monotonic()
            if time.monotonic() - stalled_at > 2:
                break  # psych stopped reading: what it holds is bounded
            time.sleep(0.01)
    sent_messages = outgoing[:sent].count(b"\n")
    check(sent < len(outgoing), f"psych stops reading while its answers go unread ({sent_messages} of {count} taken)")
    peak = s.peak_memory()
    check(peak < MEMORY_BOUND, f"psych's peak memory stayed at {peak >> 20} MiB", peak)
    # Once the client reads, every request psych took is answered: an answer is never dropped.
    answered = s.send_and_read_all(outgoing, sent, count, seconds=120)
    check(len(answered) == count, f"then all {count} are answered, none dropped", len(answered))
    s.still_serves()
    s.close()


def stranger_cancel(psych):
    s = server(psych)
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}})
    said = s.wait_for(lambda m: m.get("method") == "notifications/message", timeout=5)
    check(said is not None and "cancel_unknown_request" in json.dumps(said),
          "a cancel of a request it never made is refused by name, as a log message", said)
    s.still_serves()
    s.close()


CASES = {f.__name__: f for f in (huge_line, flood, garbage, never_reads, stranger_cancel)}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in CASES:
        print(__doc__)
        sys.exit(2)
    CASES[sys.argv[1]](sys.argv[2])
    sys.exit(1 if failures else 0)
