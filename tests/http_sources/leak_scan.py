#!/usr/bin/env python3
"""Credentials never leak (issue 36, part 5): psych run and psych mcp reach one real source of
each kind over HTTP, each with a distinctive credential from a token command, and every byte psych
produces is searched for each credential: what the program was given (the result), the --json
payload, standard error, the BlobStore's files and the run log's records. The sources are real
peers: an MCP server on the official SDK (tests/mcp_http_client/mcp_http_peers.cjs), an A2A peer on
@a2a-js/sdk (tests/a2a/sdk_peer.mjs), and an HTTP API served here. Two of them quote the credential
back on purpose: the MCP server's `whoami` tool in its result, the HTTP API's 401 page. A source
given the wrong credential must be refused by name without the wrong one appearing either.

  leak_scan.py --psych PATH --modules DIR --source-dir DIR
"""
import argparse
import base64
import http.server
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

SECRETS = {
    "mcp": "mcp-credential-3f9a7c61d2e84b05",
    "a2a": "a2a-credential-8e21d47c90b3fa16",
    "http": "httptool-credential-c5d08b7e14a92f3e",
    "wrong": "wrong-credential-71e4c2a9f06d83b5",
}

failures = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what, flush=True)
    if not condition:
        failures.append(what)


class api(http.server.BaseHTTPRequestHandler):
    """An HTTP API with one credential: /items/{id} (GET), /orders (POST), and /private, which
    answers 401 quoting the Authorization header it got, as a careless API does."""

    def log_message(self, *args):
        pass

    def answer(self, status, body, content_type="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self):
        sent = self.headers.get("Authorization", "")
        if self.path.startswith("/private") or sent != "Bearer " + SECRETS["http"]:
            self.answer(401, "not authorized: you sent " + sent, "text/plain")
            return False
        return True

    def do_GET(self):
        if self.authorized():
            self.answer(200, json.dumps({"item": self.path.split("/")[-1].split("?")[0], "path": self.path}))

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length).decode()
        if self.authorized():
            self.answer(201, json.dumps({"created": json.loads(body or "{}")}))


def start_api():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def start_mcp_peer(args, work):
    peer = subprocess.Popen(["node", str(args.source_dir / "tests/mcp_http_client/mcp_http_peers.cjs"), "sdk",
                             "--modules", args.modules, "--token", SECRETS["mcp"]],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(work / "mcp-peer.err", "wb"))
    line = peer.stdout.readline().decode()
    if not line.startswith("PORT "):
        raise SystemExit("the MCP peer did not start: " + line)
    return peer, int(line.split()[1])


def start_a2a_peer(args, work):
    port_file = work / "a2a.port"
    peer = subprocess.Popen(["node", str(args.source_dir / "tests/a2a/sdk_peer.mjs"), "--modules", args.modules,
                             "--port-file", str(port_file), "--log", str(work / "a2a.log"), "--token", SECRETS["a2a"]],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(work / "a2a-peer.err", "wb"))
    for _ in range(300):
        if port_file.exists():
            return peer, int(port_file.read_text())
        if peer.poll() is not None:
            break
        time.sleep(0.05)
    raise SystemExit("the A2A peer did not start: " + (work / "a2a-peer.err").read_text())


PROGRAM = r'''
print("x" * 20000)  # past the preview: the BlobStore keeps stdout, and its file is scanned too
out = {"tools": sorted(TOOLS)}
out["mcp"] = await call_tool("docs__echo", {"text": "hello"})
out["whoami"] = await call_tool("docs__whoami", {})
out["a2a"] = await call_tool("planner__echo", {"text": "hello"})
out["item"] = await call_tool("get_item", {"id": "7"})
for name, arguments in (("docs__fail", {}), ("planner__refuse", {}), ("private_page", {}), ("create_order", {"n": 1})):
    try:
        out[name] = await call_tool(name, arguments)
    except ToolError as error:
        out[name] = [error.kind, str(error)]
return out
'''


def write_config(work, mcp_port, a2a_port, api_port, secret_files):
    tools = {"tools": [
        {"name": "get_item", "description": "One item", "method": "GET",
         "url": f"http://127.0.0.1:{api_port}/items/{{id}}",
         "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
         "credential": {"command": f"cat {secret_files['http']}"}},
        {"name": "private_page", "description": "Always 401", "method": "GET",
         "url": f"http://127.0.0.1:{api_port}/private",
         "credential": {"command": f"cat {secret_files['http']}"}},
        {"name": "create_order", "description": "Creates an order", "method": "POST",
         "url": f"http://127.0.0.1:{api_port}/orders", "body": "json",
         "credential": {"command": f"cat {secret_files['http']}"}},
    ]}
    (work / "tools.json").write_text(json.dumps(tools))
    config = {"mcpServers": {"docs": {"type": "http", "url": f"http://127.0.0.1:{mcp_port}/mcp",
                                      "tokenCommand": f"cat {secret_files['mcp']}"}},
              "a2aPeers": {"planner": {"url": f"http://127.0.0.1:{a2a_port}", "tokenCommand": f"cat {secret_files['a2a']}"}},
              "httpTools": ["tools.json"]}
    (work / "sources.json").write_text(json.dumps(config))
    return work / "sources.json"


def mcp_session(psych, config, work, blob_dir, run_log_dir):
    """psych mcp over stdio, one run_code call, as an MCP client makes it."""
    server = subprocess.Popen([psych, "mcp", "--mcp-config", str(config), "--blob-dir", str(blob_dir),
                               "--run-log-dir", str(run_log_dir), "--pool", "0"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(work / "mcp.err", "wb"))
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "leak-scan", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "run_code", "arguments": {"program": PROGRAM}}},
    ]
    answered = {}
    lines = []
    for message in messages:
        server.stdin.write((json.dumps(message) + "\n").encode())
        server.stdin.flush()
        if "id" not in message:
            continue
        while message["id"] not in answered:
            line = server.stdout.readline()
            if not line:
                raise SystemExit("psych mcp ended early: " + (work / "mcp.err").read_text())
            lines.append(line)
            got = json.loads(line)
            if "id" in got:
                answered[got["id"]] = got
    server.stdin.close()
    rest = server.stdout.read()
    server.wait(timeout=30)
    return b"".join(lines) + rest, answered


def scan(label, data):
    for name, secret in SECRETS.items():
        forms = {secret.encode(), base64.b64encode(secret.encode()), base64.b64encode(secret.encode()).rstrip(b"=")}
        found = [form for form in forms if form in data]
        check(not found, f"{label}: no trace of the {name} credential")


def scan_tree(label, root):
    files = [p for p in pathlib.Path(root).rglob("*") if p.is_file()]
    for path in files:
        scan(f"{label} {path.relative_to(root)}", path.read_bytes())
    return len(files)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--psych", required=True)
    parser.add_argument("--modules", required=True)
    parser.add_argument("--source-dir", required=True, type=pathlib.Path)
    args = parser.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="psych-leak-scan-"))
    peers = []
    api_server = None
    try:
        secret_files = {}
        for name, secret in SECRETS.items():
            secret_files[name] = work / f"{name}.secret"
            secret_files[name].write_text(secret + "\n")
        api_server = start_api()
        mcp_peer, mcp_port = start_mcp_peer(args, work)
        peers.append(mcp_peer)
        a2a_peer, a2a_port = start_a2a_peer(args, work)
        peers.append(a2a_peer)
        config = write_config(work, mcp_port, a2a_port, api_server.server_address[1], secret_files)
        (work / "program.py").write_text(PROGRAM)

        # psych run --json, its BlobStore on.
        blob_dir = work / "blobs-run"
        run = subprocess.run([args.psych, "run", "--json", "--blob-dir", str(blob_dir), "--mcp-config", str(config),
                              str(work / "program.py")], capture_output=True, timeout=120)
        check(run.returncode == 0, f"psych run completed (exit {run.returncode}): {run.stderr.decode()[-400:]}")
        payload = json.loads(run.stdout.decode().strip().splitlines()[-1]) if run.stdout.strip() else {}
        value = (payload.get("value") or {}).get("value") if isinstance(payload.get("value"), dict) else payload.get("value")
        text = json.dumps(payload)
        print("result:", text[:3000])
        # The sources answered, so each credential reached its source.
        check('"hello"' in text and "docs__echo" in text, "the MCP server over HTTP answered")
        check("echo: hello" in text, "the A2A peer answered")
        check('"item": "7"' in text or '"item":"7"' in text, "the HTTP tool answered")
        check("http_error" in text and "401" in text, "the API's 401 is http_error with its status")
        check("approval_required_in_program" in text, "a POST tool is refused in a program")
        check("you sent Bearer [credential]" in text, "the whoami echo came back with the credential redacted")
        scan("psych run stdout", run.stdout)
        scan("psych run stderr", run.stderr)
        check(scan_tree("psych run blobs", blob_dir) > 0, "psych run's BlobStore held stdout, and it was scanned")

        # psych mcp: the same program through run_code, its run log on disk.
        mcp_blobs, run_logs = work / "blobs-mcp", work / "run-logs"
        out, answered = mcp_session(args.psych, config, work, mcp_blobs, run_logs)
        listed = json.dumps(answered.get(2, {}))
        check("run_code" in listed, "psych mcp lists run_code")
        called = json.dumps(answered.get(3, {}))
        check("echo: hello" in called and "item" in called, "psych mcp's run_code reached every source")
        scan("psych mcp stdout", out)
        scan("psych mcp stderr", (work / "mcp.err").read_bytes())
        check(scan_tree("psych mcp run log", run_logs) > 0, "psych mcp wrote a run log, and it was scanned")
        check(scan_tree("psych mcp blobs", mcp_blobs) > 0, "psych mcp's BlobStore held stdout, and it was scanned")

        # The wrong credential: refused by name, and not quoted either.
        for flag, name in (("--mcp-http", "docs"), ("--a2a", "planner")):
            url = f"http://127.0.0.1:{mcp_port}/mcp" if name == "docs" else f"http://127.0.0.1:{a2a_port}"
            wrong = subprocess.run([args.psych, "run", "--json", flag, f"{name}={url}", "--token-command-for",
                                    f"{name}=cat {secret_files['wrong']}", str(work / "program.py")],
                                   capture_output=True, timeout=60)
            said = (wrong.stdout + wrong.stderr).decode(errors="replace")
            check(wrong.returncode != 0 and ("401" in said or "credential" in said),
                  f"{flag} with the wrong credential is refused by name (exit {wrong.returncode}): {said[-300:]}")
            scan(f"{flag} wrong credential output", wrong.stdout + wrong.stderr)
    finally:
        for peer in peers:
            if peer.poll() is None:
                if peer.stdin:
                    peer.stdin.close()
                peer.send_signal(signal.SIGTERM)
                try:
                    peer.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    peer.kill()
                    peer.wait()
        if api_server:
            api_server.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("every byte psych produced was scanned: no credential found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
