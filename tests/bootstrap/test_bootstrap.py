#!/usr/bin/env python3
"""Plays the host's side of docs/contract.md against the bootstrap: the parts in
launchers/sandbox_runtime/bootstrap/, joined by compile_bootstrap.join() as the build joins them.

The bootstrap is spawned as `<python> -I -S -c <joined source> TOKEN CANARY IPV4_PORT IPV6_PORT
WORKSPACE`, cwd = a fresh workspace, fd 0 = /dev/null, fds 1/2 = pipes, fd 3 = one end of a
SOCK_STREAM socketpair. The Linux launcher passes bootstrap_loader.py as the `-c` source instead,
with the precompiled bootstrap on fd 4; the loader's own tests (test_loader_*) spawn it that way.

Run with `python3 test_bootstrap.py`; BOOTSTRAP_PYTHON=/path/to/python3 picks the
interpreter the bootstrap runs under (default: the one running this file).
Exits non-zero on any failure and ends with "N passed, M failed".
"""
import ast
import ctypes
import errno
import fcntl
import json
import os
import resource
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from script_skips import Skipped, ci_requires_every_case, log_skip  # noqa: E402
sys.path.pop(0)

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME = os.path.normpath(os.path.join(HERE, "..", "..", "launchers", "sandbox_runtime"))
with open(os.path.join(RUNTIME, "bootstrap_loader.py"), encoding="utf-8") as source_file:
    LOADER = source_file.read()
sys.path.insert(0, RUNTIME)
from compile_bootstrap import FILENAME, PARTS_DIR, join, make_blob  # noqa: E402  (the build's own join and blob)
sys.path.pop(0)
BOOTSTRAP = join().decode("utf-8")
PYTHON = os.environ.get("BOOTSTRAP_PYTHON", sys.executable)
TOKEN = "0123456789abcdef0123456789abcdef"
ENVIRONMENT = {"HOME": "/nonexistent-home", "TMPDIR": "/tmp", "PATH": "/usr/local/bin:/usr/bin:/bin",
               "PYTHONDONTWRITEBYTECODE": "1"}
HELLO_KEYS = {"pid", "ppid", "pgid", "sid", "uid", "gid", "euid", "egid", "groups", "no_new_privs",
              "seccomp_mode", "rlimits", "canary", "network", "environment_keys", "cwd",
              "workspace_entries", "namespace_ids", "root_entries", "uid_map", "gid_map",
              "capabilities_effective", "capabilities_bounding", "network_routes", "cgroup_memory_limit",
              "cgroup_pids_limit", "cgroup_cpu_usage_us", "python"}
RLIMIT_FIELDS = {"cpu_seconds": resource.RLIMIT_CPU, "address_space_bytes": resource.RLIMIT_AS,
                 "file_size_bytes": resource.RLIMIT_FSIZE, "process_count": resource.RLIMIT_NPROC,
                 "open_files": resource.RLIMIT_NOFILE, "core_bytes": resource.RLIMIT_CORE}
FORBIDDEN_AT_STARTUP = {"asyncio", "json", "re", "ast", "traceback", "socket", "linecache", "tokenize",
                        "os", "site", "enum", "functools", "collections", "inspect", "typing"}
SAMPLE_FRAMES = {}  # what the report shows the lead


def reserve_fds_3_and_4():
    """Keep fds 3 and 4 occupied in this process so no pipe Popen makes can land on them."""
    for fd in (3, 4):
        try:
            os.fstat(fd)
        except OSError:
            placeholder = os.open(os.devnull, os.O_RDONLY)
            if placeholder != fd:
                os.dup2(placeholder, fd, inheritable=False)
                os.close(placeholder)


class Child:
    """One bootstrap process and the host's end of its channel."""

    def __init__(self, canary=None, ipv4_port=0, ipv6_port=0, environment=None, extra_flags=(),
                 argv=None, setup=None, user=None, blob=None):
        """blob: run bootstrap_loader.py with these bytes on fd 4, as the launcher does."""
        self.workspace = tempfile.mkdtemp(prefix="psych-ws-")
        os.chmod(self.workspace, 0o777)
        if canary is None:
            canary = os.path.join(self.workspace + "-canary")
            with open(canary, "w") as handle:
                handle.write("secret")
        self.canary = canary
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        child_fd = child.fileno()
        blob_fd = sealed_memfd(blob) if blob is not None else None

        def in_child():
            if setup:
                setup()
            os.dup2(child_fd, 3)  # inheritable, like the launcher's fd 3
            if blob_fd is not None:
                os.dup2(blob_fd, 4)

        args = argv if argv is not None else [TOKEN, canary, str(ipv4_port), str(ipv6_port), self.workspace]
        self.process = subprocess.Popen(
            [PYTHON, "-I", "-S", *extra_flags, "-c", BOOTSTRAP if blob is None else LOADER, *args], cwd=self.workspace,
            env=ENVIRONMENT if environment is None else environment, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(3,) if blob is None else (3, 4),
            preexec_fn=in_child, user=user)
        child.close()
        if blob_fd is not None:
            os.close(blob_fd)
        self.host = host
        self.host.settimeout(20)
        self.buffer = b""

    def read_line(self):
        while b"\n" not in self.buffer:
            chunk = self.host.recv(1 << 20)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def read_frame(self):
        line = self.read_line()
        return None if line is None else json.loads(line)

    def send(self, frame):
        self.host.sendall(frame if isinstance(frame, bytes) else json.dumps(frame).encode() + b"\n")

    def finish(self, timeout=20):
        stdout, stderr = self.process.communicate(timeout=timeout)
        self.host.close()
        shutil.rmtree(self.workspace, ignore_errors=True)
        if self.canary.startswith(self.workspace):
            os.unlink(self.canary)
        return self.process.returncode, stdout, stderr


def sealed_memfd(data):
    """What the launcher hands the child as fd 4: a sealed memfd, read from offset 0."""
    fd = os.memfd_create("psych-bootstrap", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.pwrite(fd, data, 0)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
                | fcntl.F_SEAL_WRITE)
    return fd


def run(program, filename=None, **child_options):
    """hello → run → done; returns (done frame, raw done line, stdout, stderr, exit code, hello)."""
    child = Child(**child_options)
    hello = child.read_frame()
    frame = {"type": "run", "program": program}
    if filename is not None:
        frame["filename"] = filename
    child.send(frame)
    raw = child.read_line()
    code, stdout, stderr = child.finish()
    assert raw is not None, f"no done frame; exit {code}; stderr {stderr.decode()!r}"
    return json.loads(raw), raw, stdout.decode(), stderr.decode(), code, hello


def value_of(program, **options):
    done, _, _, stderr, code, _ = run(program, **options)
    assert code == 0, (code, stderr)
    assert done["type"] == "done" and done["ok"] is True, done
    return done["value"]


def error_of(program, **options):
    done, _, _, stderr, code, _ = run(program, **options)
    assert code == 0, (code, stderr)
    assert done["type"] == "done" and done["ok"] is False, done
    error = done["error"]
    assert set(error) == {"kind", "type", "message", "traceback", "line", "limit_hint"}, error
    return error


def exit_code_after(*frames, argv=None):
    child = Child(argv=argv)
    hello = child.read_frame() if argv is None else None
    try:
        for frame in frames:
            child.send(frame)
        child.host.shutdown(socket.SHUT_WR)  # the host has nothing more to say: EOF
    except OSError:
        pass
    leftover = child.read_line() if argv is None else None
    code, stdout, stderr = child.finish()
    return code, hello, leftover, stdout, stderr


# ---- hello ----------------------------------------------------------------------------------

def test_hello_comes_first_and_reports_containment():
    def set_limits():
        resource.setrlimit(resource.RLIMIT_CPU, (100, 101))
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (10 << 20, 10 << 20))
    child = Child(setup=set_limits)
    hello = child.read_frame()  # nothing was sent: the bootstrap speaks first
    child.send({"type": "abort", "reason": "test"})
    code, _, _ = child.finish()
    SAMPLE_FRAMES["hello"] = hello
    assert code == 0
    assert hello["type"] == "hello" and hello["token"] == TOKEN
    report = hello["report"]
    assert HELLO_KEYS <= set(report), HELLO_KEYS - set(report)
    assert report["pid"] == child.process.pid and report["ppid"] == os.getpid()
    assert report["pgid"] == os.getpgid(0) and report["sid"] == os.getsid(0)
    assert [report[k] for k in ("uid", "gid", "euid", "egid")] == [os.getuid(), os.getgid(), os.geteuid(), os.getegid()]
    assert isinstance(report["groups"], list)
    assert isinstance(report["no_new_privs"], bool) and isinstance(report["seccomp_mode"], int)
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status.read().splitlines())
    assert report["no_new_privs"] == (int(fields["NoNewPrivs"]) == 1)
    assert report["seccomp_mode"] == int(fields["Seccomp"])
    assert report["rlimits"]["cpu_seconds"] == [100, 101]
    assert report["rlimits"]["open_files"] == [256, 256]
    assert report["rlimits"]["core_bytes"] == [0, 0]
    assert report["rlimits"]["file_size_bytes"] == [10 << 20, 10 << 20]
    for field, which in RLIMIT_FIELDS.items():
        if field not in ("cpu_seconds", "open_files", "core_bytes", "file_size_bytes"):
            expected = [-1 if v == resource.RLIM_INFINITY else v for v in resource.getrlimit(which)]
            assert report["rlimits"][field] == expected, (field, report["rlimits"][field], expected)
    assert report["canary"] == {"readable": True, "error_number": 0}
    skipped = {"outcome": "skipped", "error_number": 0}
    # No egress proxy either: the argv named none (network=allowlist adds egress=PORT).
    assert report["network"] == {"ipv4": skipped, "ipv6": skipped,
                                 "proxy": {"outcome": "skipped", "status": 0, "error_number": 0}}
    keys = report["environment_keys"]
    assert keys == sorted(keys)
    # Python's C-locale coercion (PEP 538) adds LC_CTYPE when the environment names no locale.
    assert set(keys) - {"LC_CTYPE"} == set(ENVIRONMENT), keys
    assert report["cwd"] == child.workspace and report["cwd_is_workspace"] is True
    assert report["workspace_entries"] == 0
    # Run here, outside any sandbox: the test's own namespaces, root and routes.
    for kind in ("mnt", "pid", "net", "user", "ipc", "uts", "cgroup"):
        assert report["namespace_ids"][kind] == os.readlink(f"/proc/self/ns/{kind}")
    assert report["root_entries"] == sorted(os.listdir("/"))[:256]
    assert report["uid_map"] == " ".join(open("/proc/self/uid_map").read().split())
    assert len(report["capabilities_effective"]) == 16 and report["network_routes"] >= 0
    version = subprocess.run([PYTHON, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                             capture_output=True, text=True).stdout.strip()
    assert report["python"] == version


def test_hello_counts_workspace_entries():
    def populate():
        for name in ("a", "b"):
            open(name, "w").close()
    child = Child(setup=populate)
    report = child.read_frame()["report"]
    child.send({"type": "abort", "reason": "test"})
    child.finish()
    assert report["workspace_entries"] == 2


def test_canary_missing_reports_errno():
    child = Child(canary="/nonexistent/psych-canary")
    report = child.read_frame()["report"]
    child.send({"type": "abort", "reason": "test"})
    child.finish()
    assert report["canary"] == {"readable": False, "error_number": errno.ENOENT}


def other_uid_can_run_python():
    """Root can run the child as nobody, if nobody can reach the interpreter (pyenv's is in /root)."""
    if os.geteuid() != 0:
        raise Skipped("needs root to run the child as another uid")
    probe = subprocess.run([PYTHON, "-I", "-S", "-c", "pass"], user=65534, cwd="/", capture_output=True) \
        if os.access(PYTHON, os.X_OK) and all(os.stat(d).st_mode & 0o001 for d in parent_directories(PYTHON)) else None
    if probe is None or probe.returncode != 0:
        raise Skipped(f"uid 65534 cannot run {PYTHON}")


def parent_directories(path):
    path = os.path.dirname(os.path.realpath(path))
    while path != "/":
        yield path
        path = os.path.dirname(path)


def test_other_uid_cannot_read_canary():
    other_uid_can_run_python()
    child = Child(user=65534)
    os.chmod(child.canary, 0o600)  # raced against the child's probe: checked below
    report = child.read_frame()["report"]
    child.send({"type": "abort", "reason": "test"})
    child.finish()
    assert report["uid"] == report["euid"] == 65534
    assert report["canary"] in ({"readable": False, "error_number": errno.EACCES}, {"readable": True, "error_number": 0})


def free_port(family, address):
    probe = socket.socket(family, socket.SOCK_STREAM)
    probe.bind((address, 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def test_network_probes_connected_refused_skipped():
    listener = socket.create_server(("127.0.0.1", 0))
    listener6 = socket.create_server(("::1", 0), family=socket.AF_INET6) if socket.has_ipv6 else None
    try:
        port6 = listener6.getsockname()[1] if listener6 else 0
        child = Child(ipv4_port=listener.getsockname()[1], ipv6_port=port6)
        network = child.read_frame()["report"]["network"]
        child.send({"type": "abort", "reason": "test"})
        child.finish()
        assert network["ipv4"] == {"outcome": "connected", "error_number": 0}, network
        assert network["ipv6"] == ({"outcome": "connected", "error_number": 0} if listener6 else
                                   {"outcome": "skipped", "error_number": 0}), network
        child = Child(ipv4_port=free_port(socket.AF_INET, "127.0.0.1"), ipv6_port=0)
        network = child.read_frame()["report"]["network"]
        child.send({"type": "abort", "reason": "test"})
        child.finish()
        assert network["ipv4"] == {"outcome": "refused", "error_number": errno.ECONNREFUSED}, network
        assert network["ipv6"] == {"outcome": "skipped", "error_number": 0}
    finally:
        listener.close()
        if listener6:
            listener6.close()


def test_network_probe_times_out_when_nothing_answers():
    # A full accept queue makes Linux drop the SYN, so the connect neither succeeds nor fails.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(listener.getsockname())
        fillers.append(filler)
    time.sleep(0.1)
    try:
        started = time.monotonic()
        child = Child(ipv4_port=listener.getsockname()[1])
        network = child.read_frame()["report"]["network"]
        elapsed = time.monotonic() - started
        child.send({"type": "abort", "reason": "test"})
        child.finish()
        assert network["ipv4"]["outcome"] == "timeout", network
        assert elapsed < 5, elapsed
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


# ---- sequence and protocol ------------------------------------------------------------------

def test_abort_exits_zero_without_running_anything():
    code, hello, leftover, stdout, stderr = exit_code_after(
        {"type": "abort", "reason": "isolation_unavailable: test", "program": "print('ran')"})
    assert hello["type"] == "hello"
    assert (code, leftover, stdout) == (0, None, b""), (code, leftover, stdout, stderr)


def test_protocol_violations_exit_3():
    cases = {
        "unknown type first": {"type": "call", "name": "x"},
        "result before run": {"type": "result", "ok": True},
        "not json": b"this is not json\n",
        "not an object": b"[1, 2]\n",
        "no type": b'{"program": "return 1"}\n',
        "duplicate keys": b'{"type": "run", "type": "abort"}\n',
        "trailing bytes": b'{"type": "abort"} x\n',
        "NaN": b'{"type": "run", "program": "1", "x": NaN}\n',
        "invalid utf-8": b'{"type": "run", "program": "\xff"}\n',
        "program not a string": {"type": "run", "program": 5},
        "eof before a frame": b'{"type": "ru',
    }
    for name, frame in cases.items():
        code, _, leftover, stdout, _ = exit_code_after(frame)
        assert (code, leftover, stdout) == (3, None, b""), (name, code, leftover)
    code, hello, _, _, stderr = exit_code_after(argv=["only-a-token"])
    assert code == 3 and b"expected" in stderr
    # A sixth argument may only say that the sandbox is prepared (docs/pools.md), or where the
    # egress proxy listens (docs/network.md); nothing else, and never both.
    for extra in (["warm"], ["egress=x"], ["prepared", "egress=3128"]):
        code, hello, _, _, stderr = exit_code_after(argv=[TOKEN, "/nonexistent", "0", "0", tempfile.gettempdir(), *extra])
        assert code == 3 and b"[prepared|egress=PORT]" in stderr, extra


def test_oversized_frame_is_refused_as_it_arrives():
    child = Child()
    child.read_frame()
    chunk = b"x" * (1 << 20)

    def flood():
        try:
            for _ in range(65):
                child.host.sendall(chunk)
            child.host.sendall(b"x\n")
        except OSError:
            pass
    writer = threading.Thread(target=flood)
    writer.start()
    code = child.process.wait(timeout=60)
    writer.join()
    child.finish()
    assert code == 3, code


def test_empty_lines_before_run_are_skipped():
    child = Child()
    child.read_frame()
    child.send(b"\n\r\n\n" + json.dumps({"type": "run", "program": "return 7"}).encode() + b"\n")
    done = child.read_frame()
    code, _, _ = child.finish()
    assert done == {"type": "done", "ok": True, "value": 7} and code == 0


# ---- program semantics ----------------------------------------------------------------------

VALUE_CASES = [
    ("return 1", 1),
    ("x = 2\nx * 21", 42),
    ("x = 1", None),
    ("", None),
    ("print('hi')", None),
    ("return", None),
    ("'''only a docstring'''", "only a docstring"),
    ('"""doc"""\nfrom __future__ import annotations\nx: int = 3\nreturn __doc__, x', ["doc", 3]),
    ("if True:\n    return 'if'\nreturn 'after'", "if"),
    ("for i in range(5):\n    if i == 3:\n        return i\nreturn -1", 3),
    ("for i in range(3):\n    for j in range(3):\n        if i * j == 2:\n            return [i, j]\nreturn None", [1, 2]),
    ("i = 0\nwhile True:\n    i += 1\n    if i > 4:\n        return i", 5),
    ("for i in range(2):\n    pass\nelse:\n    return 'else'\nreturn 'no'", "else"),
    ("for i in range(3):\n    for j in range(3):\n        break\n    else:\n        return 'inner else'\nreturn 'done'", "done"),
    ("try:\n    return 'try'\nexcept:\n    return 'caught'", "try"),
    ("try:\n    return 'try'\nexcept BaseException:\n    return 'caught'", "try"),
    ("try:\n    return 1\nfinally:\n    return 2", 2),
    ("try:\n    1 / 0\nfinally:\n    return 'finally wins'", "finally wins"),
    ("log = []\ntry:\n    try:\n        return log\n    finally:\n        log.append('inner')\nfinally:\n    log.append('outer')", ["inner", "outer"]),
    ("try:\n    raise ValueError\nexcept ValueError:\n    return 'handler'", "handler"),
    ("try:\n    pass\nexcept ValueError:\n    pass\nelse:\n    return 'try else'", "try else"),
    ("try:\n    raise ValueError\nexcept* ValueError:\n    pass\nreturn 'star'", "star"),
    ("try:\n    return 'star body'\nexcept* BaseException:\n    pass", "star body"),
    ("match [1, 2]:\n    case [a, b]:\n        return a + b\n    case _:\n        return 0", 3),
    ("def f():\n    return 'function'\nreturn f()", "function"),
    ("def f():\n    for i in range(3):\n        return i\nf()", 0),
    ("class A:\n    def m(self):\n        return 'method'\nA().m()", "method"),
    ("events = []\nclass Tracker:\n    def __enter__(self):\n        return self\n"
     "    def __exit__(self, *exc):\n        events.append(exc[0])\nwith Tracker():\n    return events", [None]),
    ("import contextlib\nwith contextlib.suppress(BaseException):\n    return 'not swallowed'\nreturn 'swallowed'", "not swallowed"),
    ("x = 10\ndef f():\n    return x + 1\nf()", 11),
    ("def set_it():\n    global g\n    g = 'global'\nset_it()\nreturn g", "global"),
    ("import __main__, pickle\ndef f(): pass\nreturn [__main__.f is f, len(pickle.dumps(f)) > 0, __name__]", [True, True, "__main__"]),
    ("return sorted(k for k in globals() if k.startswith('__psych'))", []),
    ("import sys\nreturn sys.argv", ["<program>"]),
    ("import sys\nreturn sys.dont_write_bytecode", True),
    ("import os\nreturn os.get_inheritable(3)", False),
    ("async def g():\n    return 3\nreturn await g()", 3),
    ("class Aiter:\n    def __init__(self): self.n = 0\n    def __aiter__(self): return self\n"
     "    async def __anext__(self):\n        self.n += 1\n        if self.n > 3: raise StopAsyncIteration\n        return self.n\n"
     "total = 0\nasync for n in Aiter():\n    total += n\n    if total > 2:\n        return total", 3),
    ("class Yield:\n    def __await__(self):\n        yield\n        return 'bare yield'\nawait Yield()", "bare yield"),
    ("import asyncio\nawait asyncio.sleep(0.01)\nreturn 'asyncio' in __import__('sys').modules", True),
    ("import asyncio\nasync def work(out):\n    await asyncio.sleep(0.01)\n    out.append('finished')\nout = []\n"
     "async with asyncio.TaskGroup() as group:\n    group.create_task(work(out))\n    return out", ["finished"]),
    ("async def agen():\n    yield 1\n    yield 2\nreturn [x async for x in agen()]", [1, 2]),
    ("exit()", None),
    ("import sys\nsys.exit(0)", None),
    ("raise SystemExit(False)", None),
    ("quit(None)", None),
    ("a = [1]\nreturn [a, a]", [[1], [1]]),
    ("return (1, 2.5, None, True, {'k': 'v'})", [1, 2.5, None, True, {"k": "v"}]),
    ("return 'héllo ✓ \\U0001F600'", "héllo ✓ \U0001F600"),
    ("return -2**63, 2**64", [-2**63, 2**64]),
    ("import collections\nreturn collections.OrderedDict(b=1, a=2)", {"b": 1, "a": 2}),
    ("import enum\nclass N(enum.IntEnum):\n    ONE = 1\nreturn N.ONE", 1),
]


def test_program_values():
    failures = []
    for program, expected in VALUE_CASES:
        try:
            got = value_of(program)
            if got != expected:
                failures.append((program, expected, got))
        except AssertionError as error:
            failures.append((program, expected, error))
    assert not failures, "\n".join(map(repr, failures))


def test_done_frame_is_byte_exact_utf8_and_big_ints_survive():
    done, raw, _, _, _, _ = run("return {'text': 'naïve ✓', 'n': 7 ** 5000}")
    SAMPLE_FRAMES["done ok"] = raw.decode()[:120] + "..."
    assert "naïve ✓".encode() in raw and b"\\u" not in raw
    assert str(7 ** 5000).encode() in raw  # 4226 digits: under Python's limit, exact on the wire
    done, raw, *_ = run("return 1")
    assert raw == b'{"type":"done","ok":true,"value":1}'


def test_return_inside_with_commits_like_a_real_return():
    program = ("import atexit, sqlite3\nc = sqlite3.connect('db')\nc.execute('create table t(x)')\n"
               "count = lambda: sqlite3.connect('db').execute('select count(*) from t').fetchone()[0]\n"
               "atexit.register(lambda: print('rows', count()))\n"
               "with c:\n    c.execute('insert into t values (1)')\n    return 'ok'")
    done, _, stdout, _, code, _ = run(program)
    assert done["value"] == "ok" and stdout == "rows 1\n" and code == 0, (done, stdout)


def test_stdout_and_stderr_are_flushed_before_done():
    program = ("import atexit, sys, time\nprint('partial line', end='')\nsys.stderr.write('to stderr')\n"
               "atexit.register(time.sleep, 2)\nreturn 'v'")
    child = Child()
    child.read_frame()
    child.send({"type": "run", "program": program})
    done = child.read_frame()
    # The child is still sleeping in atexit: whatever is in the pipes now was flushed before done.
    out_ready, _, _ = select.select([child.process.stdout, child.process.stderr], [], [], 1)
    stdout = os.read(child.process.stdout.fileno(), 1000)
    stderr = os.read(child.process.stderr.fileno(), 1000)
    code, _, _ = child.finish()
    assert done == {"type": "done", "ok": True, "value": "v"}
    assert stdout == b"partial line" and stderr == b"to stderr" and code == 0, (stdout, stderr, code)


def test_installed_packages_are_importable():
    version = subprocess.run([PYTHON, "-I", "-c", "import sys, site; print(site.getsitepackages())"],
                             capture_output=True, text=True).stdout
    expected = [path for path in eval(version) if os.path.isdir(path)]
    path = value_of("import sys\nreturn sys.path")
    assert expected and all(entry in path for entry in expected), (expected, path)
    for directory in expected:
        if os.path.isdir(os.path.join(directory, "yaml")):
            assert value_of("import yaml\nreturn yaml.__name__") == "yaml"
            break


# ---- failures are data ----------------------------------------------------------------------

def test_exception_reports_type_message_line_and_trimmed_traceback():
    error = error_of("x = 1\ny = 0\nx / y")
    SAMPLE_FRAMES["done exception"] = error
    assert error["kind"] == "exception" and error["type"] == "ZeroDivisionError"
    assert error["message"] == "division by zero" and error["line"] == 3 and error["limit_hint"] == ""
    assert error["traceback"].startswith('Traceback (most recent call last):\n  File "<program>", line 3, in <module>\n    x / y\n')
    assert error["traceback"].endswith("ZeroDivisionError: division by zero\n")
    error = error_of("def inner():\n    raise ValueError('bad')\n\ninner()", filename="analysis.py")
    assert error["line"] == 2 and 'File "analysis.py", line 4, in <module>' in error["traceback"]
    assert 'File "analysis.py", line 2, in inner\n    raise ValueError(\'bad\')' in error["traceback"]
    # Our own frames are recognised by their globals, not by the "<string>" they share with -c.
    error = error_of("1 / 0", filename="<string>")
    assert error["traceback"].count('File "<string>"') == 1 and error["line"] == 1, error["traceback"]


def test_exception_types_are_qualified_and_library_frames_kept():
    error = error_of("import json\n\njson.loads('{')")
    assert error["type"] == "json.decoder.JSONDecodeError" and error["line"] == 3
    assert "json/decoder.py" in error["traceback"] or "json/__init__.py" in error["traceback"]
    assert error_of("class Boom(Exception):\n    pass\nraise Boom('x')")["type"] == "Boom"
    error = error_of("try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    raise KeyError('k') from e")
    assert error["type"] == "KeyError" and error["line"] == 4 and "direct cause" in error["traceback"]
    assert error_of("raise KeyboardInterrupt")["type"] == "KeyboardInterrupt"


def test_exception_under_asyncio_starts_at_the_program():
    error = error_of("import asyncio\nasync def fail():\n    await asyncio.sleep(0)\n    1 / 0\nawait fail()")
    assert error["type"] == "ZeroDivisionError" and error["line"] == 4, error
    assert error["traceback"].startswith('Traceback (most recent call last):\n  File "<program>", line 5, in <module>')
    assert "asyncio" not in error["traceback"].split("\n", 3)[1], error["traceback"]


def test_huge_error_text_is_clipped():
    error = error_of("raise ValueError('x' * 3_000_000)")
    assert 200_000 < len(error["message"]) < 300_000 and "characters omitted" in error["message"]
    assert len(error["traceback"]) < 300_000 and error["traceback"].endswith("x\n")


def test_system_exit_nonzero_is_an_exception():
    for program, message in (("import sys\nsys.exit(2)", "2"), ("exit('bye')", "bye"), ("raise SystemExit(0.0)", "0.0")):
        error = error_of(program)
        assert (error["kind"], error["type"], error["message"]) == ("exception", "SystemExit", message), error


def test_await_needing_a_loop_without_imports_is_explained():
    error = error_of("class Future:\n    def __await__(self):\n        yield 'a future'\nawait Future()")
    assert error["type"] == "RuntimeError" and "event loop" in error["message"] and error["line"] == 3


def test_syntax_errors():
    error = error_of("x = 1\ny = (", filename="prog.py")
    SAMPLE_FRAMES["done syntax_error"] = error
    assert error["kind"] == "syntax_error" and error["type"] == "SyntaxError" and error["line"] == 2
    assert error["traceback"].startswith('  File "prog.py", line 2') and "Traceback" not in error["traceback"]
    error = error_of("if True:\nreturn 1")
    assert error["kind"] == "syntax_error" and error["type"] == "IndentationError" and error["line"] == 2
    # Found only when compiling the rewritten tree: the source line is still shown.
    error = error_of("x = 1\ndef f():\n    await g()")
    assert error["kind"] == "syntax_error" and error["line"] == 3 and "await g()" in error["traceback"], error
    error = error_of("class A:\n    return 1")
    assert error["kind"] == "syntax_error" and "'return' outside function" in error["message"] and error["line"] == 2
    for program in ("break", "return 1\ncontinue", "for i in range(2):\n    pass\nbreak\nreturn 1"):
        error = error_of(program)
        assert error["kind"] == "syntax_error", (program, error)
    assert error_of("x = 1\x00")["kind"] == "syntax_error"
    error = error_of("compile('1 +', 'inner', 'exec')")  # raised while running: an exception
    assert (error["kind"], error["type"]) == ("exception", "SyntaxError")


def test_limit_hints():
    assert error_of("raise MemoryError")["limit_hint"] == "memory_bytes"
    assert error_of("x = bytearray(1 << 62)")["limit_hint"] == "memory_bytes"
    assert error_of("try:\n    raise MemoryError\nexcept MemoryError as e:\n    raise ValueError('w') from e")["limit_hint"] == "memory_bytes"
    assert error_of("try:\n    raise MemoryError\nexcept MemoryError:\n    raise ValueError('w')")["limit_hint"] == "memory_bytes"
    error = error_of("import resource\nresource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))\n"
                     "with open('big', 'wb', buffering=0) as f:\n    f.write(b'x' * 1000)\n    f.write(b'x')")
    assert error["limit_hint"] == "file_size_bytes" and error["line"] == 5, error
    assert error_of("import errno\ndef fork():\n    raise BlockingIOError(errno.EAGAIN, 'no')\nfork()")["limit_hint"] == "process_count"
    assert error_of("import errno\ndef read():\n    raise BlockingIOError(errno.EAGAIN, 'no')\nread()")["limit_hint"] == ""
    assert error_of("import errno\nraise OSError(errno.ENOSPC, 'full')")["limit_hint"] == ""
    assert error_of("1 / 0")["limit_hint"] == ""


def test_process_count_hint_from_real_fork_failures():
    other_uid_can_run_python()

    def one_process_only():
        resource.setrlimit(resource.RLIMIT_NPROC, (1, 1))
    for program in ("import os\nos.fork()", "import subprocess\nsubprocess.run(['true'])",
                    "import threading\nthreading.Thread(target=print).start()"):
        error = error_of(program, user=65534, setup=one_process_only)
        assert error["limit_hint"] == "process_count", (program, error)


def test_value_not_serializable():
    cases = [
        ("return {1, 2}", "set", "value is of type set"),
        ("return {'a': [1, object()]}", "object", "value['a'][1] is of type object"),
        ("return [b'bytes']", "bytes", "value[0] is of type bytes"),
        ("return float('nan')", "float", "value is nan"),
        ("return {'x': float('inf')}", "float", "value['x'] is inf"),
        ("l = []\nl.append(l)\nreturn l", "list", "value[0] contains itself"),
        ("d = {}\nd['me'] = d\nreturn d", "dict", "value['me'] contains itself"),
        ("return {1: 'one'}", "int", "value has the key 1"),
        ("return {'a': {None: 1}}", "NoneType", "value['a'] has the key None"),
        ("return {'a': {(1, 2): 1}}", "tuple", "value['a'] has the key (1, 2)"),
        ("return [10 ** 5000]", "int", "value[0] is an int with more than 4300 digits"),
        ("return ['ok', '\\ud800']", "str", "value[1] contains a lone surrogate"),
        ("return {'\\udcff': 1}", "str", "contains a lone surrogate"),
        ("x = []\nfor _ in range(100):\n    x = [x]\nreturn x", "list", "is nested deeper than 63 levels"),
        ("return 'x' * (17 << 20)", "str", "a frame carries at most"),
        ("import datetime\nreturn datetime.date(2024, 1, 1)", "datetime.date", "is of type datetime.date"),
        ("class Bad(dict):\n    def items(self):\n        raise RuntimeError('hostile')\nreturn Bad(a=1)", "RuntimeError", "hostile"),
    ]
    for program, type_name, fragment in cases:
        error = error_of(program)
        assert error["kind"] == "value_not_serializable" and error["type"] == type_name, (program, error)
        assert fragment in error["message"], (program, error["message"])
    SAMPLE_FRAMES["done value_not_serializable"] = error_of("return {'rows': [1, {2}]}")
    nested = "x = 1\nfor _ in range({}):\n    x = [x]\nreturn x"
    value = value_of(nested.format(63))  # 63 lists, 64 levels with the done object: the most a frame carries
    for _ in range(63):
        value = value[0]
    assert value == 1
    assert "nested deeper than 63" in error_of(nested.format(64))["message"]
    assert error_of("import sys\nsys.stdout = None\nreturn {1}")["kind"] == "value_not_serializable"


def test_exit_code_is_zero_whatever_the_program_did():
    for program in ("return 1", "1 / 0", "return {1}", "x = ("):
        assert run(program)[4] == 0


def test_program_garbage_is_still_finalized_at_exit():
    # The bootstrap freezes its own objects for the GC before the program runs, never after it:
    # a cycle the program leaves behind is still collected at shutdown, its __del__ still runs.
    program = "class A:\n    def __del__(self):\n        print('bye')\na = A()\na.me = a\nreturn 1"
    done, _, stdout, stderr, code, _ = run(program)
    assert (done["value"], stdout, code) == (1, "bye\n", 0), (done, stdout, stderr)


def test_open_file_in_a_global_is_flushed_before_done():
    # The child may end with _exit after done: what shutdown would flush must already be on disk
    # when the host sees done, whether held by a global, a cycle, or a __del__.
    with tempfile.TemporaryDirectory() as where:
        path = os.path.join(where, "out.txt")
        program = (f"f = open({path!r}, 'w')\nf.write('kept')\n"
                   f"class Node:\n    pass\nn = Node()\nn.me = n\nn.file = open({path!r} + '.2', 'w')\n"
                   f"n.file.write('cycle')\nreturn 1")
        done, _, _, stderr, code, _ = run(program)
        assert (done["value"], code) == (1, 0), (done, stderr)
        assert open(path).read() == "kept" and open(path + ".2").read() == "cycle"


def test_threads_and_atexit_still_run_after_done():
    # The fast exit is taken only when shutdown has nothing to do for the program.
    program = ("import threading, time\ndef late():\n    time.sleep(0.2)\n    print('thread', flush=True)\n"
               "threading.Thread(target=late).start()\nreturn 1")
    done, _, stdout, _, code, _ = run(program)
    assert (done["value"], stdout, code) == (1, "thread\n", 0)
    done, _, stdout, _, code, _ = run("import atexit\natexit.register(print, 'atexit')\nreturn 2")
    assert (done["value"], stdout, code) == (2, "atexit\n", 0)


def test_large_program_runs():
    program = "".join(f"v{i} = {i}\n" for i in range(100_000)) + "return v99999"
    assert value_of(program) == 99999


def test_quick_exit_is_still_taken_while_the_flusher_runs():
    # The flusher thread is the bootstrap's own: it does not make shutdown necessary. A quick exit
    # leaves an object held by builtins unfinalized; a full shutdown would print from its __del__.
    program = ("import builtins, os\nclass Late:\n    def __del__(self):\n        os.write(1, b'shutdown ran')\n"
               "builtins.late = Late()\nprint('printed')\nreturn 1")
    done, _, stdout, stderr, code, _ = run(program)
    assert (done["value"], stdout, code) == (1, "printed\n", 0), (done, stdout, stderr)


# ---- bindings: calls of the agent's tools, and a forgotten await ------------------------------

def run_with_tools(program, tools=("lookup_order", "fails"), **child_options):
    """hello → run with these bindings → each call answered (`fails` with tool_failed, any other
    with {"tool", "arguments", "total": 42}) → done. Returns (done, stdout, stderr, calls)."""
    child = Child(**child_options)
    child.read_frame()
    child.send({"type": "run", "program": program,
                "bindings": [{"name": name, "description": "", "deferred": False} for name in tools]})
    calls = []
    while (frame := child.read_frame()) is not None and frame["type"] == "call":
        calls.append(frame)
        if frame["tool"] == "fails":
            child.send({"type": "result", "id": frame["id"], "ok": False,
                        "error": {"kind": "tool_failed", "tool": "fails", "message": "it broke"}})
        else:
            child.send({"type": "result", "id": frame["id"], "ok": True,
                        "value": {"tool": frame["tool"], "arguments": frame["arguments"], "total": 42}})
    code, stdout, stderr = child.finish()
    assert frame is not None and code == 0, (code, stderr)
    return frame, stdout.decode(), stderr.decode(), calls


def only_program_frames(traceback_text, filename="<program>"):
    files = [line.split('"')[1] for line in traceback_text.splitlines() if line.startswith('  File "')]
    return bool(files) and all(name == filename for name in files)


AWAIT_LOOKUP = "lookup_order(...) must be awaited: write `await lookup_order(...)`"


def test_a_binding_call_used_without_await_says_what_to_write():
    uses = [("r['total']", "TypeError"), ("r.get('total')", "AttributeError"), ("for x in r:\n    pass", "TypeError"),
            ("print(r)", "TypeError"), ("if r:\n    pass", "TypeError"), ("len(r)", "TypeError"),
            ("r == {}", "TypeError"), ("f'{r}'", "TypeError"), ("r + 1", "TypeError"), ("'total' in r", "TypeError"),
            ("with r:\n    pass", "TypeError"), ("int(r)", "TypeError")]
    for use, error_type in uses:
        for header in ("", "import asyncio\n"):  # driven by hand, and under asyncio.run
            program = f"{header}x = 1\nr = lookup_order(sku='A')\n{use}\nreturn 'not reached'"
            done, _, stderr, calls = run_with_tools(program)
            error = done.get("error", {})
            assert error.get("type") == error_type and error["message"].startswith(AWAIT_LOOKUP), (use, done)
            assert error["line"] == 3 + bool(header), (use, error)
            assert only_program_frames(error["traceback"]), (use, error["traceback"])
            # One message, not a second RuntimeWarning about the same call; and the tool never ran.
            assert "Warning" not in stderr and calls == [], (use, stderr, calls)
    done, _, _, _ = run_with_tools("call_tool('lookup_order', {'sku': 'A'})['total']")
    assert done["error"]["message"].startswith("call_tool(...) must be awaited: write `await call_tool(...)`"), done
    done, _, _, _ = run_with_tools("t = lookup_order(sku='A')\nv = await t\nreturn t['total']")
    assert "is the call, not its result: write `result = await lookup_order(...)`" in done["error"]["message"], done


def test_a_binding_call_dropped_without_await_is_reported_at_its_line():
    cases = [("lookup_order(sku='A')\nreturn 1", 1),  # dropped at once
             ("def f():\n    lookup_order(sku='A')\nf()\nreturn 1", 2),  # dropped as f returns
             ("x = 0\nunused = lookup_order(sku='A')\nreturn 1", 2),  # left in a global at the end
             ("for i in range(3):\n    lookup_order(sku=i)\nreturn 1", 2),  # once per line, not per call
             ("import asyncio\nlookup_order(sku='A')\nreturn 1", 2)]
    for program, line in cases:
        done, _, stderr, calls = run_with_tools(program)
        assert done == {"type": "done", "ok": True, "value": 1}, (program, done)
        expected = (f"<program>:{line}: RuntimeWarning: lookup_order(...) was never awaited: "
                    "write `await lookup_order(...)`; without await the tool is not called\n")
        assert stderr == expected, (program, stderr)
        assert calls == [], (program, calls)
    # The program's own coroutine, left unawaited: Python's warning, at the program's line.
    done, _, stderr, _ = run_with_tools("async def total():\n    return 1\nr = total()\nreturn 1")
    assert done["value"] == 1 and stderr == ("<program>:1: RuntimeWarning: coroutine 'total' was never awaited: "
                                             "write `await total(...)`\n"), stderr
    done, _, stderr, _ = run_with_tools("async def total():\n    return 1\nr = total()\nr['x']")
    assert done["error"]["type"] == "TypeError" and "'coroutine' object is not subscriptable" in done["error"]["message"]
    assert "<program>:1: RuntimeWarning: coroutine 'total' was never awaited" in stderr and "<string>" not in stderr


def test_returning_a_binding_call_without_await_says_what_to_write():
    for program, path in (("return lookup_order(sku='A')", "value"), ("[lookup_order(sku=s) for s in 'AB']", "value[0]")):
        done, _, stderr, calls = run_with_tools(program)
        error = done["error"]
        assert error["kind"] == "value_not_serializable" and error["message"].startswith(f"{path} is a call, not its result: "
                                                                                           f"{AWAIT_LOOKUP}"), error
        assert calls == [] and "Warning" not in stderr, (stderr, calls)


def test_awaited_binding_calls_work_alone_gathered_and_as_tasks():
    cases = [("r = await lookup_order(sku='A')\nreturn r['total'], r['arguments']", [42, {"sku": "A"}]),
             ("return (await call_tool('lookup_order', {'sku': 'B'}))['arguments']", {"sku": "B"}),
             ("import asyncio\nrs = await asyncio.gather(lookup_order(sku='A'), call_tool('lookup_order', {'sku': 'B'}))\n"
              "return [r['arguments']['sku'] for r in rs]", ["A", "B"]),
             ("import asyncio\ntask = asyncio.create_task(lookup_order(sku='T'))\nreturn (await task)['arguments']",
              {"sku": "T"}),
             ("import asyncio\nasync with asyncio.TaskGroup() as group:\n    t = group.create_task(lookup_order(sku='G'))\n"
              "return t.result()['arguments']", {"sku": "G"}),
             ("import asyncio\nreturn (await asyncio.wait_for(lookup_order(sku='W'), 5))['arguments']", {"sku": "W"}),
             ("import asyncio\nasync def main():\n    return await lookup_order(sku='R')\n"
              "return asyncio.run(main())['arguments']", {"sku": "R"}),
             ("return (await list_tools())['tool'], (await get_tool_info('x'))['tool']", ["list_tools", "get_tool_info"]),
             ("return repr(lookup_order(sku='A')).startswith('<ToolCall lookup_order(...), not awaited')", True)]
    for program, expected in cases:
        done, _, stderr, calls = run_with_tools(program, tools=("lookup_order",))
        assert done == {"type": "done", "ok": True, "value": expected}, (program, done, stderr)
        assert "coroutine" not in stderr, (program, stderr)


def test_an_alias_that_does_not_exist_names_the_closest_tools_and_call_tool():
    tools = ("ev__add_numbers", "ev__echo", "list-repos", "lookup_order")
    done, _, _, calls = run_with_tools("return await ev__add(a=1, b=2)", tools=tools)
    error = done["error"]
    assert error["type"] == "NameError" and not calls, done
    assert error["message"].startswith("name 'ev__add' is not defined; no offered tool is named 'ev__add'; "
                                       "the closest offered: ev__add_numbers"), error
    assert "`await call_tool('list-repos', {...})` reaches any offered name" in error["message"], error
    assert error["message"] in error["traceback"], error  # the traceback's last line says the same
    # A name nowhere near a tool is Python's own NameError, word for word.
    done, _, _, _ = run_with_tools("return undefined_thing", tools=tools)
    assert done["error"]["message"] == "name 'undefined_thing' is not defined", done
    # Without tools there is nothing to point at.
    done, _, _, _ = run_with_tools("return ev__add()", tools=())
    assert done["error"]["message"] == "name 'ev__add' is not defined", done


def test_positional_tool_arguments_say_to_pass_them_by_name():
    done, _, _, calls = run_with_tools("return await lookup_order('A')")
    assert done["error"]["type"] == "ToolError" and not calls, done
    assert done["error"]["message"] == ("malformed_call: lookup_order: pass the arguments by name (keyword "
                                        "arguments): `await lookup_order(key=value, ...)`; got a positional str"), done
    done, _, _, calls = run_with_tools("return await call_tool('lookup_order', 'A')")
    assert not calls and done["error"]["message"] == (
        "malformed_call: lookup_order: call_tool's arguments are one dict of named values: "
        "`await call_tool('lookup_order', {'key': value})`; got a positional str"), done


def test_a_tool_error_traceback_shows_only_the_program():
    for header in ("", "import asyncio\n"):
        done, _, stderr, _ = run_with_tools(f"{header}x = 1\nawait fails(n=1)")
        error = done["error"]
        assert (error["type"], error["line"]) == ("ToolError", 2 + bool(header)), error
        assert only_program_frames(error["traceback"]), error["traceback"]
        assert error["traceback"].endswith("ToolError: tool_failed: fails: it broke\n"), error["traceback"]


# ---- output reaches the host while the program runs --------------------------------------------

def output_before_kill(program, seconds=1.0):
    """Runs a program that never ends; returns what its stdout and stderr pipes held after
    `seconds`, then kills it: what a host ending it at its wall clock would have."""
    child = Child()
    child.read_frame()
    child.send({"type": "run", "program": program})
    held = {child.process.stdout.fileno(): b"", child.process.stderr.fileno(): b""}
    for fd in held:
        os.set_blocking(fd, False)
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select(list(held), [], [], left)
        for fd in ready:
            held[fd] += os.read(fd, 1 << 16)
    child.process.kill()
    stdout_fd, stderr_fd = child.process.stdout.fileno(), child.process.stderr.fileno()
    child.finish()
    return held[stdout_fd].decode(), held[stderr_fd].decode()


def test_output_printed_before_a_kill_reaches_the_pipes():
    programs = ["import time\nprint('early line')\nimport sys\nsys.stderr.write('no newline')\ntime.sleep(30)",
                "print('early line')\nimport sys\nsys.stderr.write('no newline')\nwhile True:\n    pass",  # holds the GIL
                "import sys, io\nsys.stdout = io.TextIOWrapper(sys.stdout.buffer, encoding='utf-8')\n"
                "print('early line')\nsys.stderr.write('no newline')\nimport time\ntime.sleep(30)",
                "import signal, time\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM):\n"
                "    signal.signal(s, signal.SIG_IGN)\nprint('early line')\nimport sys\nsys.stderr.write('no newline')\n"
                "import os\nos.read(os.open('/dev/zero', os.O_RDONLY), 0)\ntime.sleep(30)"]
    for program in programs:
        stdout, stderr = output_before_kill(program, 1.0)
        assert (stdout, stderr) == ("early line\n", "no newline"), (program, stdout, stderr)


def test_the_flusher_never_takes_a_signal_meant_for_the_program():
    # SIGUSR1 blocked by the program stays pending: the flusher thread blocks every signal, so the
    # kernel cannot hand it the process-directed signal (whose default action would end the process).
    program = ("import os, signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
               "os.kill(os.getpid(), signal.SIGUSR1)\ntime.sleep(0.2)\nreturn signal.SIGUSR1 in signal.sigpending()")
    done, _, _, stderr, code, _ = run(program)
    assert (done, code) == ({"type": "done", "ok": True, "value": True}, 0), (done, code, stderr)


def test_forks_while_the_flusher_runs_keep_every_line():
    # A fork waits for a flush in progress: the child never inherits a stream's lock held by the
    # flusher thread, which it does not have (a child that did would hang at its own flush).
    program = ("import os, sys\nfor i in range(100):\n    print('parent', i, flush=True)\n    pid = os.fork()\n    if pid == 0:\n"
               "        print('child', i)\n        sys.stdout.flush()\n        os._exit(0)\n    os.waitpid(pid, 0)\nreturn 1")
    done, _, stdout, stderr, code, _ = run(program)
    assert (done["value"], code) == (1, 0), (done, stderr)
    lines = stdout.splitlines()
    assert sorted(lines) == sorted([f"parent {i}" for i in range(100)] + [f"child {i}" for i in range(100)]), stdout[:500]


# ---- the loader: how the launcher starts the bootstrap ------------------------------------------

def magic_of_python():
    return subprocess.run([PYTHON, "-I", "-S", "-c", "import sys; sys.stdout.buffer.write("
                           "sys.modules['_frozen_importlib_external'].MAGIC_NUMBER)"],
                          capture_output=True, check=True).stdout


def blob_with(code, source, magic):
    """A blob in compile_bootstrap.py's layout with any code and source, to tell the paths apart."""
    return magic + len(code).to_bytes(4, "little") + code + source


def test_loader_runs_the_precompiled_bootstrap():
    blob = make_blob(BOOTSTRAP.encode(), magic_of_python())
    # The source half is poison: if the loader compiled it, the child would die before hello.
    poisoned = blob[:len(blob) - len(BOOTSTRAP.encode())] + b"raise SystemExit('the source was compiled')"
    done, _, _, stderr, code, hello = run("return 1", blob=poisoned)
    assert (code, done) == (0, {"type": "done", "ok": True, "value": 1}), (code, done, stderr)
    assert hello["type"] == "hello" and set(hello["report"]) >= HELLO_KEYS, hello


def test_loader_compiles_the_source_under_another_magic():
    # Another interpreter version: its bytecode (here garbage) is never unmarshalled.
    blob = blob_with(b"\x00not marshal data", BOOTSTRAP.encode(), b"\xff\xff\r\n")
    done, _, _, stderr, code, hello = run("import sys\nreturn sys.argv", blob=blob)
    assert (code, done) == (0, {"type": "done", "ok": True, "value": ["<program>"]}), (code, done, stderr)
    assert hello["token"] == TOKEN


def test_loader_closes_fd_4_before_the_program_runs():
    # readlink opens nothing, so fd 4 is asked about before anything could reuse the number.
    program = """import os
def target(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except FileNotFoundError:
        return "closed"
fd4 = target(4)
return {"fd4": fd4, "all": [target(int(fd)) for fd in os.listdir("/proc/self/fd")]}"""
    value = value_of(program, blob=make_blob(BOOTSTRAP.encode(), magic_of_python()))
    assert value["fd4"] == "closed", value
    assert not any("memfd:" in target for target in value["all"]), value


def test_loader_refuses_a_truncated_blob_with_exit_3():
    for blob in (b"", make_blob(BOOTSTRAP.encode(), magic_of_python())[:1000]):
        child = Child(blob=blob)
        assert child.read_line() is None  # no hello: nothing ran
        code, _, stderr = child.finish()
        assert code == 3 and b"cannot load the bootstrap from fd 4" in stderr, (code, stderr)


# ---- the Windows side: what of it runs anywhere -------------------------------------------------
# No Windows CPython runs here (docs/windows-launcher.md): these check what the bootstrap's Windows
# branches hold that needs no Windows, read or compiled from the bootstrap's own source, against the
# host's decoder (include/psych/reports.hpp). The rest waits for the CI matrix's Windows job.

REPORTS_HPP = os.path.normpath(os.path.join(HERE, "..", "..", "include", "psych", "reports.hpp"))


def bootstrap_functions(*names):
    """Top-level functions of the bootstrap compiled from its source alone, without running the rest
    of it: for its pure parts, which need nothing but their arguments."""
    tree = ast.parse(BOOTSTRAP, FILENAME)
    wanted = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name in names]
    namespace = {}
    exec(compile(ast.Module(wanted, []), FILENAME, "exec", dont_inherit=True), namespace)
    return [namespace[name] for name in names]


def report_keys(function_name):
    """The keys of the dict literal a function of the bootstrap returns as hello's report."""
    function = next(node for node in ast.parse(BOOTSTRAP).body
                    if isinstance(node, ast.FunctionDef) and node.name == function_name)
    returned = [node.value for node in ast.walk(function) if isinstance(node, ast.Return)
                and isinstance(node.value, ast.Dict)]
    assert len(returned) == 1, function_name
    return {key.value for key in returned[0].keys}


def adapted_fields(struct):
    """The members BOOST_HANA_ADAPT_STRUCT lists for psych::<struct>: what the host decodes."""
    with open(REPORTS_HPP, encoding="utf-8") as header:
        text = " ".join(header.read().split())
    start = text.index(f"BOOST_HANA_ADAPT_STRUCT(psych::{struct},")
    return [name.strip() for name in text[start:text.index(")", start)].split(",")[1:]]


def test_bootstrap_source_parses_and_compiles():
    ast.parse(BOOTSTRAP, FILENAME)
    compile(BOOTSTRAP, FILENAME, "exec", dont_inherit=True)


def test_windows_hello_has_the_shape_the_host_decodes():
    # Every member of child_report, as the Windows test child writes them; POSIX leaves out `job`.
    fields = set(adapted_fields("child_report"))
    assert report_keys("windows_containment_report") == fields, report_keys("windows_containment_report") ^ fields
    assert report_keys("containment_report") == fields - {"job"}, report_keys("containment_report") ^ fields


def test_windows_job_structures_have_the_layout_of_winnt_h():
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        raise Skipped("the layout checked is 64-bit Windows', which a 64-bit host's ctypes reproduces")
    [job_structures] = bootstrap_functions("job_structures")
    extended, ui = job_structures(ctypes)
    basic, io = (dict(extended._fields_)[name] for name in ("BasicLimitInformation", "IoInfo"))
    # JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOBOBJECT_BASIC_LIMIT_INFORMATION, IO_COUNTERS and
    # JOBOBJECT_BASIC_UI_RESTRICTIONS on x64 (mingw-w64's winnt.h agrees).
    assert [ctypes.sizeof(t) for t in (extended, basic, io, ui)] == [144, 64, 48, 4]
    assert {name: getattr(basic, name).offset for name in ("LimitFlags", "MinimumWorkingSetSize", "ActiveProcessLimit",
                                                          "Affinity", "PriorityClass", "SchedulingClass")} == {
        "LimitFlags": 16, "MinimumWorkingSetSize": 24, "ActiveProcessLimit": 40, "Affinity": 48,
        "PriorityClass": 56, "SchedulingClass": 60}
    assert [getattr(extended, name).offset for name in ("IoInfo", "ProcessMemoryLimit", "JobMemoryLimit",
                                                        "PeakProcessMemoryUsed", "PeakJobMemoryUsed")] == [
        64, 112, 120, 128, 136]


def test_windows_job_reads_back_by_the_launchers_rules():
    """job_limits against launchers/windows/job_readback.cpp: a job set as the launcher sets it, one
    that reads back nothing (Wine), breakaway allowed, UI restrictions partial or unreadable."""
    job_structures, job_limits = bootstrap_functions("job_structures", "job_limits")
    extended_type, _ = job_structures(ctypes)
    unset_job = {"in_job": False, "kill_on_close": False, "breakaway_forbidden": False, "ui_restricted": False,
                 "active_processes_limit": -1, "memory_bytes": -1, "cpu_seconds": -1}
    unset_rlimits = {field: [-1, -1] for field in RLIMIT_FIELDS}
    job, rlimits = job_limits(None, None)  # no job to query
    assert list(job) == adapted_fields("job_readback") and sorted(rlimits) == sorted(adapted_fields("child_rlimits"))
    assert (job, rlimits) == (unset_job, unset_rlimits)
    assert job_limits(extended_type(), None) == (unset_job, unset_rlimits)  # Wine: every flag and limit 0

    info = extended_type()
    basic = info.BasicLimitInformation
    # KILL_ON_JOB_CLOSE, DIE_ON_UNHANDLED_EXCEPTION, ACTIVE_PROCESS, JOB_MEMORY, PROCESS_MEMORY, JOB_TIME, PROCESS_TIME
    basic.LimitFlags = 0x2000 | 0x400 | 0x8 | 0x200 | 0x100 | 0x4 | 0x2
    basic.ActiveProcessLimit = 67
    basic.PerJobUserTimeLimit = 10 * 10_000_000
    basic.PerProcessUserTimeLimit = 10 * 10_000_000 + 1  # whole seconds, rounded up
    info.JobMemoryLimit, info.ProcessMemoryLimit = 512 << 20, 256 << 20
    job, rlimits = job_limits(info, 0xFF)
    # in_job is IsProcessInJob's answer, which read_job sets over this.
    assert job == {**unset_job, "kill_on_close": True, "breakaway_forbidden": True, "ui_restricted": True,
                   "active_processes_limit": 67, "memory_bytes": 512 << 20, "cpu_seconds": 10}, job
    assert rlimits == {**unset_rlimits, "cpu_seconds": [11, 11], "address_space_bytes": [256 << 20, 256 << 20],
                       "process_count": [67, 67]}, rlimits
    assert job_limits(info, 0x7F)[0]["ui_restricted"] is False
    assert job_limits(info, None)[0]["ui_restricted"] is False  # the UI query failed
    for breakaway in (0x800, 0x1000):  # BREAKAWAY_OK, SILENT_BREAKAWAY_OK
        basic.LimitFlags |= breakaway
        assert job_limits(info, 0xFF)[0]["breakaway_forbidden"] is False
        basic.LimitFlags &= ~breakaway
    basic.LimitFlags = 0x2000  # values without their flags read back as unset
    assert job_limits(info, None) == ({**unset_job, "kill_on_close": True, "breakaway_forbidden": True},
                                      unset_rlimits)


# ---- startup cost (printed, and the forbidden modules asserted absent) ------------------------

def imported_modules(program=None):
    """Runs with -X importtime; returns [(module, self us, cumulative us)]."""
    if program is None:
        result = subprocess.run([PYTHON, "-I", "-S", "-X", "importtime", "-c", "pass"], capture_output=True,
                                text=True, env=ENVIRONMENT)
        stderr = result.stderr
    else:
        child = Child(extra_flags=("-X", "importtime"))
        child.read_frame()
        child.send({"type": "run", "program": program})
        assert child.read_frame() == {"type": "done", "ok": True, "value": 1}
        stderr = child.finish()[2].decode()
    rows = []
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "imported package" not in line:
            self_us, cumulative_us, name = line[len("import time:"):].split("|")
            rows.append((name.strip(), int(self_us), int(cumulative_us)))
    return rows


def wall_times_ms(args, queued=b"", repeats=25, blob=None):
    """Spawn-to-exit times of `<python> -I -S <args>` with fd 3 set up identically for all
    runs and the host's frame already queued, so only the interpreter's own work differs.
    blob: also on fd 4, as the launcher hands it to the loader."""
    samples = []
    for _ in range(repeats):
        host, child = socket.socketpair()
        host.sendall(queued)
        child_fd = child.fileno()
        blob_fd = sealed_memfd(blob) if blob is not None else None

        def in_child():
            os.dup2(child_fd, 3)
            if blob_fd is not None:
                os.dup2(blob_fd, 4)

        started = time.perf_counter()
        subprocess.run([PYTHON, "-I", "-S", *args], cwd=tempfile.gettempdir(), env=ENVIRONMENT,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       pass_fds=(3,) if blob is None else (3, 4), preexec_fn=in_child, check=True)
        samples.append((time.perf_counter() - started) * 1000)
        host.close()
        child.close()
        if blob_fd is not None:
            os.close(blob_fd)
    return min(samples), statistics.median(samples)


def test_top_level_await_without_imports_skips_asyncio():
    for program, expected in (("async def g():\n    return 3\nreturn await g()", 3),
                              ("import math\nasync def g():\n    return 3\nreturn await g()", 3)):
        child = Child(extra_flags=("-X", "importtime"))
        child.read_frame()
        child.send({"type": "run", "program": program})
        done = child.read_frame()
        stderr = child.finish()[2].decode()
        imported = {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}
        assert done == {"type": "done", "ok": True, "value": expected}, done
        assert ("asyncio" in imported) == ("import" in program), (program, "asyncio" in imported)


def fastest_imports(program=None, runs=7):
    """Per-module import time, best of several runs: this measures the work, not the noise."""
    best = {}
    for _ in range(runs):
        for name, self_us, cumulative_us in imported_modules(program):
            previous = best.get(name, (self_us, cumulative_us))
            best[name] = (min(previous[0], self_us), min(previous[1], cumulative_us))
    return [(name, self_us, cumulative_us) for name, (self_us, cumulative_us) in best.items()]


def test_startup_cost_of_return_1():
    bare = fastest_imports()
    boot = fastest_imports(program="return 1")
    bare_names = {name for name, *_ in bare}
    boot_names = {name for name, *_ in boot}
    added = [row for row in boot if row[0] not in bare_names]
    print(f"    bare `{PYTHON} -I -S -c pass` imports: {sorted(bare_names)}")
    print(f"    bare import time (sum of self times, best of 7): {sum(r[1] for r in bare)} us")
    print("    bootstrap for `return 1` adds: " + ", ".join(f"{n} ({s} us)" for n, s, *_ in added))
    print(f"    bootstrap import time (same measure): {sum(r[1] for r in boot)} us "
          f"(+{sum(r[1] for r in added)} us over bare)")
    SAMPLE_FRAMES["imports added by the bootstrap"] = [name for name, *_ in added]

    run_frame = json.dumps({"type": "run", "program": "return 1"}).encode() + b"\n"
    bootstrap_args = ["-c", BOOTSTRAP, TOKEN, "/nonexistent", "0", "0", tempfile.gettempdir()]
    bare_min, bare_median = wall_times_ms(["-c", "pass"])
    boot_min, boot_median = wall_times_ms(bootstrap_args, run_frame)
    loader_min, loader_median = wall_times_ms(["-c", LOADER, *bootstrap_args[2:]], run_frame,
                                          blob=make_blob(BOOTSTRAP.encode(), magic_of_python()))
    print(f"    spawn to exit, min/median of 25: bare {bare_min:.1f}/{bare_median:.1f} ms; "
          f"bootstrap running `return 1` {boot_min:.1f}/{boot_median:.1f} ms as source, "
          f"{loader_min:.1f}/{loader_median:.1f} ms precompiled through the loader (as the launcher runs it)")
    compile_ms = subprocess.run(
        [PYTHON, "-I", "-S", "-c", "import sys, time\nsource = sys.argv[1]\nbest = 1e9\nfor _ in range(20):\n"
         "    started = time.perf_counter(); compile(source, '<string>', 'exec')\n"
         "    best = min(best, time.perf_counter() - started)\nprint(round(best * 1000, 2))", BOOTSTRAP],
        capture_output=True, text=True).stdout.strip()
    print(f"    of which compiling the {len(BOOTSTRAP)}-byte bootstrap source (-c, no .pyc): {compile_ms} ms (best of 20)")
    assert not (boot_names & FORBIDDEN_AT_STARTUP), boot_names & FORBIDDEN_AT_STARTUP
    probing = Child(ipv4_port=free_port(socket.AF_INET, "127.0.0.1"), extra_flags=("-X", "importtime"))
    probing.read_frame()
    probing.send({"type": "abort", "reason": "test"})
    stderr = probing.finish()[2].decode()
    probed = {line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")}
    assert "_socket" in probed and not (probed & FORBIDDEN_AT_STARTUP), probed & FORBIDDEN_AT_STARTUP


def main():
    reserve_fds_3_and_4()
    print(f"bootstrap: {PARTS_DIR}, joined\ninterpreter: {PYTHON}")
    tests = [(name, test) for name, test in globals().items() if name.startswith("test_") and callable(test)]
    passed = failed = skipped = 0
    for name, test in tests:
        started = time.monotonic()
        try:
            test()
        except Skipped as reason:
            if ci_requires_every_case():
                failed += 1
                print(f"FAIL {name}: skipped in CI (CI=true, root), where every case must run: {reason}")
            else:
                skipped += 1
                log_skip("bootstrap", name, reason)
                print(f"SKIPPED {name}: {reason}")
        except Exception:
            failed += 1
            print(f"FAIL {name}\n{traceback.format_exc()}")
        else:
            passed += 1
            print(f"ok   {name} ({time.monotonic() - started:.2f} s)")
    if os.environ.get("BOOTSTRAP_SHOW_FRAMES"):
        for label, frame in SAMPLE_FRAMES.items():
            print(f"{label}: {json.dumps(frame, ensure_ascii=False) if not isinstance(frame, str) else frame}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped (counted neither as passed nor as failed)")
    if failed:
        return 1
    # ctest's SKIP_RETURN_CODE: a run in which nothing but skips happened is not a pass.
    return 77 if skipped and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
