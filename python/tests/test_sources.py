"""The sources over HTTP beside Python tools, through psych_runtime: an A2A peer built on the
official SDK (@a2a-js/sdk, tests/a2a/sdk_peer.mjs) and an HTTP endpoint declared as a tool, each
with a credential that comes from a callback or a command and never appears in what comes back."""
import json
import os
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import psych_runtime
from psych_runtime import A2aPeer, CodeTool, RunLog, Runtime

from conftest import REPO, build_dir, spec_with_code

TOKEN = "s3cr3t-token-for-the-test"


@pytest.fixture
def a2a_peer(tmp_path):
    modules = build_dir() / "mcp-servers"
    if not (modules / "node_modules" / "@a2a-js" / "sdk").exists():
        message = f"@a2a-js/sdk is not in {modules}: scripts/install-mcp-servers installs it"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    port_file, log = tmp_path / "port", tmp_path / "peer.log"
    peer = subprocess.Popen(["node", str(REPO / "tests" / "a2a" / "sdk_peer.mjs"), "--modules", str(modules),
                             "--port-file", str(port_file), "--log", str(log), "--token", TOKEN])
    try:
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            assert peer.poll() is None, "the peer ended before it listened"
            assert time.monotonic() < deadline, "the peer never listened"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text().strip()}", log
    finally:
        peer.terminate()
        peer.wait(timeout=10)


async def test_an_a2a_peers_skills_are_tools(sandbox, a2a_peer):
    url, log = a2a_peer
    peer = A2aPeer("planner", url, token=lambda: TOKEN)
    with Runtime(sandbox=sandbox, a2a_peers=[peer]) as runtime:
        attempt = runtime.start_attempt(runtime.publish(spec_with_code()), RunLog.memory())
        outcome = await attempt.run_code(
            "names = [n for n in TOOLS if n.startswith('planner__')]\n"
            "echoed = await planner__echo(text='hello there')\n"
            "try:\n    await call_tool('planner__refuse', {})\nexcept ToolError as e:\n    kind = e.kind\n"
            "return [sorted(names), echoed, kind]"
        )
        assert outcome.result.ok, outcome.result.failure
        names, echoed, kind = outcome.result.value
        assert "planner__echo" in names and "planner__word-count" in names
        assert "hello there" in json.dumps(echoed)
        assert kind == "tool_failed"
        assert TOKEN not in outcome.payload and TOKEN not in json.dumps(outcome.result.value)
    assert "call echo" in log.read_text()


async def test_an_unreachable_a2a_peer_fails_the_runtime_at_start(sandbox):
    with pytest.raises(psych_runtime.PsychError, match="planner"):
        Runtime(sandbox=sandbox, a2a_peers=[A2aPeer("planner", "http://127.0.0.1:9", timeout=2)])


class _Inventory(BaseHTTPRequestHandler):
    seen_credentials: list = []

    def do_GET(self):
        _Inventory.seen_credentials.append(self.headers.get("Authorization"))
        if self.path.startswith("/items/"):
            body = json.dumps({"id": self.path.split("/")[2].split("?")[0], "stock": 7}).encode()
            self.send_response(200)
        else:
            body = b'{"error": "no such route"}'
            self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        pass


@pytest.fixture
def inventory():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Inventory)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_http_tools_declared_as_tools(sandbox, inventory, tmp_path):
    secret_file = tmp_path / "token"
    secret_file.write_text(TOKEN + "\n")
    declarations = {"tools": [
        {"name": "get_item", "description": "One item, by id.", "url": inventory + "/items/{id}",
         "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
         "credential": {"command": f"cat {secret_file}"}},
        {"name": "get_missing", "url": inventory + "/nothing"},
    ]}

    def local_total(stock: int) -> int:
        return stock * 2

    with Runtime(sandbox=sandbox, tools=[CodeTool("local_total", local_total)], http_tools=declarations) as runtime:
        attempt = runtime.start_attempt(runtime.publish(spec_with_code("local_total", "get_item", "get_missing")),
                                        RunLog.memory())
        outcome = await attempt.run_code(
            "item = await get_item(id='A-1')\n"
            "try:\n    await get_missing()\nexcept ToolError as e:\n    kind = e.kind\n"
            "return [item, await local_total(stock=item['stock']), kind]"
        )
        assert outcome.result.ok, outcome.result.failure
        item, total, kind = outcome.result.value
        assert item == {"id": "A-1", "stock": 7} and total == 14 and kind == "http_error"
        assert TOKEN not in outcome.payload
    assert f"Bearer {TOKEN}" in _Inventory.seen_credentials
