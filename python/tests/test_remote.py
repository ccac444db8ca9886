"""RemoteSandbox against a real `psych serve` on loopback (the packaged CLI, TLS, a token file): the
program runs on the service, its call to a Python tool comes back and runs here, and the credential
is in nothing that comes back."""
import asyncio
import json
import secrets
import socket
import subprocess
import time

import pytest

import psych_runtime
from psych_runtime import CodeTool, RunLog, Runtime
from psych_runtime._paths import psych_executable
from psych_runtime.sandbox.remote import RemoteSandbox

from conftest import spec_with_code


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def service(tmp_path):
    cert, key, tokens = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "tokens.txt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-days", "1"],
                   check=True, capture_output=True)
    token = secrets.token_urlsafe(24)
    tokens.write_text(f"alice {token}\n")
    port = free_port()
    served = subprocess.Popen([psych_executable(), "serve", "--listen", f"127.0.0.1:{port}", "--tls-cert", str(cert),
                               "--tls-key", str(key), "--token-file", str(tokens), "--backend", "linux-namespaces"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert served.poll() is None, served.stderr.read().decode()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "psych serve never listened"
                time.sleep(0.05)
        yield f"https://127.0.0.1:{port}", str(cert), token
    finally:
        served.terminate()
        served.wait(timeout=30)


async def test_a_program_on_a_service_calls_a_python_tool_here(service):
    url, cert, token = service
    seen = []

    def here(n: int) -> int:
        seen.append(n)
        return n + 1

    remote = RemoteSandbox(url, token=lambda: token, ca_file=cert)
    described = await remote.describe()
    assert described.ready and described.backend == "remote:linux-namespaces"
    with Runtime(sandbox=remote, tools=[CodeTool("here", here)]) as runtime:
        attempt = runtime.start_attempt(runtime.publish(spec_with_code("here")), RunLog.memory())
        outcome = await attempt.run_code("import socket\nreturn [await here(n=41), socket.gethostname()]")
        assert outcome.result.ok, outcome.result.failure
        assert outcome.result.value[0] == 42 and seen == [41]
        assert outcome.result.isolation == psych_runtime.IsolationLevel.ISOLATED
        assert token not in outcome.payload and token not in json.dumps(outcome.result.value)


async def test_a_wrong_token_is_refused_before_anything_runs(service):
    url, cert, _ = service
    remote = RemoteSandbox(url, token=lambda: "not-the-token", ca_file=cert)
    described = await remote.describe()
    assert not described.ready
    assert any("401" in problem or "token" in problem for problem in described.problems), described.problems
    result = await remote.run("open('/tmp/ran', 'w')\nreturn 1")
    assert not result.ok and result.value is None
