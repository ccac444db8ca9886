"""Shared fixtures of the Python face's tests. They run inside the venv python/tests/run-pytest made,
against the package `pip install ./python` installed there (never the source tree's files)."""
import os
import shutil
from pathlib import Path

import pytest

import psych_runtime
from psych_runtime.sandbox.local import local_sandbox

REPO = Path(__file__).resolve().parents[2]


def build_dir() -> Path:
    return Path(os.environ.get("PSYCH_BUILD_DIR", REPO / "build"))


@pytest.fixture(scope="session")
def sandbox():
    """The strongest local backend that reaches PROCESS, opened once (its probe ran)."""
    return local_sandbox()


@pytest.fixture(scope="session")
def process_sandbox():
    """The plain process backend: its children are the host's processes, so a test can see them."""
    return local_sandbox(backend="linux-process")


@pytest.fixture(scope="session")
def isolated_sandbox():
    """The local backend at isolation=isolated (namespaces: root, or unprivileged user namespaces);
    skipped, with the backend's own reason, where this host cannot make one."""
    try:
        return local_sandbox(isolation=psych_runtime.IsolationLevel.ISOLATED)
    except psych_runtime.SandboxSetupError as unavailable:
        pytest.skip(f"no local backend reaches isolation=isolated here: {unavailable.message}")


@pytest.fixture
def filesystem_server(tmp_path):
    """The npm reference filesystem MCP server (scripts/install-mcp-servers), over stdio."""
    binary = build_dir() / "mcp-servers" / "node_modules" / ".bin" / "mcp-server-filesystem"
    if not binary.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{binary} is missing: scripts/install-mcp-servers installs it")
        pytest.skip(f"{binary} is missing: run scripts/install-mcp-servers {build_dir() / 'mcp-servers'}")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "a.txt").write_text("alpha\n")
    (shared / "b.txt").write_text("beta\n")
    return psych_runtime.McpServer("fs", [str(binary), str(shared)]), shared


def spec_with_code(*tools, **code_execution) -> psych_runtime.AgentSpec:
    return psych_runtime.AgentSpec(
        name="analyst",
        model=psych_runtime.ModelRef(model="scripted"),
        tools=tuple(psych_runtime.CodeTool(name=name) for name in tools),
        code_execution=psych_runtime.CodeExecution(**code_execution),
    )


def node_available() -> bool:
    return shutil.which("node") is not None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Every skip is a line in $PSYCH_SKIP_LOG, which scripts/test sums up across the suite; and in
    CI (root, every mechanism present) a skip is a failure: a skip is never evidence of support."""
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    skip_log = os.environ.get("PSYCH_SKIP_LOG")
    if skip_log:
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        with open(skip_log, "a", encoding="utf-8") as log:
            log.write(f"python.pytest\t{item.name}\t{reason}\n")
    if os.environ.get("CI") == "true":
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, where every case must run: {report.longrepr}"
