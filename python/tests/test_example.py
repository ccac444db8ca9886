"""The scripted agent of examples/python/agent.py runs, and every one of its turns goes as it says."""
import subprocess
import sys

from conftest import REPO, build_dir


def test_the_scripted_agent(filesystem_server):
    binary = build_dir() / "mcp-servers" / "node_modules" / ".bin" / "mcp-server-filesystem"
    ran = subprocess.run(
        [sys.executable, str(REPO / "examples" / "python" / "agent.py"), "--fs-server", str(binary)],
        capture_output=True, text=True, timeout=300,
    )
    print(ran.stdout, ran.stderr)
    assert ran.returncode == 0
    assert sum(line.startswith("turn ") for line in ran.stdout.splitlines()) == 4
    assert "FAILED" not in ran.stdout and ran.stdout.count("  ok: ") == 4
