#!/usr/bin/env python3
"""The Windows loader's own logic, on Linux: launchers/sandbox_runtime/bootstrap_loader_windows.py.

On Windows the loader reads the handover pipe through `_winapi` (ReadFile, CloseHandle), which
Linux has not. Each case runs the loader's exact source in a fresh interpreter with a `_winapi`
in sys.modules that keeps those two calls' documented behaviour on a real pipe: ReadFile returns
(bytes, 0) and raises BrokenPipeError once the writer has closed its end, as an anonymous pipe
does; CloseHandle closes it. What the cases check is the loader's: the layout it reads (628
bytes of WSAPROTOCOL_INFOW, then the blob), the bytecode or the source it runs, sys.argv without
the handle, the pipe closed before the bootstrap runs, and exit 3 on a short pipe. What only
Windows shows (the handle inherited, socket.fromshare) the CI matrix's Windows job runs
(tests/windows_launcher/test_windows_python.cpp).

Exits non-zero on any failure and ends with "N passed, M failed".
"""
import os
import subprocess
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME = os.path.normpath(os.path.join(HERE, "..", "..", "launchers", "sandbox_runtime"))
with open(os.path.join(RUNTIME, "bootstrap_loader_windows.py"), encoding="utf-8") as source_file:
    LOADER = source_file.read()
sys.path.insert(0, RUNTIME)
from compile_bootstrap import make_blob  # noqa: E402  (the build's own blob format)
sys.path.pop(0)
PYTHON = os.environ.get("BOOTSTRAP_PYTHON", sys.executable)
SHARE = bytes(range(256)) * 2 + bytes(116)  # 628 bytes, recognisable
ARGUMENTS = ["0123456789abcdef0123456789abcdef", "CANARY", "1234", "5678", "WORKSPACE"]

# The stand-in for Windows' _winapi, then the loader as the launcher passes it.
HARNESS = """import sys, posix
class _winapi:
    @staticmethod
    def ReadFile(handle, size):
        data = posix.read(handle, size)
        if not data:
            raise BrokenPipeError(109, "The pipe has been ended")
        return data, 0
    @staticmethod
    def CloseHandle(handle):
        posix.close(handle)
sys.modules["_winapi"] = _winapi
del _winapi
exec(compile(%r, "<loader>", "exec"))
"""

# What the "bootstrap" of these cases reports: what the loader left it.
PROBE = b"""import sys, posix
try:
    posix.fstat(HANDLE_FD)
    handle = "open"
except OSError:
    handle = "closed"
sys.stdout.write(repr((CHANNEL_SHARE, sys.argv, handle, HOW)))
"""


def magic_of(python):
    return subprocess.run([python, "-I", "-S", "-c",
                           "import sys; sys.stdout.buffer.write(sys.modules['_frozen_importlib_external'].MAGIC_NUMBER)"],
                          check=True, capture_output=True).stdout


def run_loader(handover_of):
    """Runs the loader with `handover_of(handle)` on its handover pipe: (status, stdout, stderr)."""
    reader, writer = os.pipe()
    try:
        child = subprocess.Popen([PYTHON, "-I", "-S", "-c", HARNESS % LOADER, ARGUMENTS[0], str(reader), *ARGUMENTS[1:]],
                                 pass_fds=(reader,), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    finally:
        os.close(reader)
    with os.fdopen(writer, "wb") as pipe:
        try:
            pipe.write(handover_of(reader))
        except BrokenPipeError:  # a loader that gave up early
            pass
    out, err = child.communicate(timeout=60)
    return child.returncode, out.decode(), err.decode()


def probe_source(handle, how):
    return PROBE.replace(b"HANDLE_FD", str(handle).encode()).replace(b"HOW", repr(how).encode())


def blob_with(code, source, magic):
    return magic + len(code).to_bytes(4, "little") + code + source


def test_runs_the_precompiled_bootstrap_with_the_argv_of_posix():
    magic = magic_of(PYTHON)

    def handover(handle):
        blob = make_blob(probe_source(handle, "bytecode"), magic)
        # The source half is poison: if the loader compiled it, the child would fail.
        return SHARE + blob[:8 + int.from_bytes(blob[4:8], "little")] + b"raise SystemExit('the source was compiled')"

    code, out, err = run_loader(handover)
    assert code == 0, (code, err)
    share, argv, handle_state, how = eval(out)
    assert share == SHARE
    assert argv == ["-c", *ARGUMENTS], argv  # the handle is gone: the bootstrap parses what POSIX gives it
    assert handle_state == "closed", handle_state  # before any of the bootstrap ran
    assert how == "bytecode"


def test_compiles_the_source_under_another_magic():
    # Another interpreter version: its bytecode (here garbage) is never unmarshalled.
    code, out, err = run_loader(lambda handle: SHARE + blob_with(b"\x00not marshal data",
                                                                 probe_source(handle, "source"), b"\xff\xff\r\n"))
    assert code == 0, (code, err)
    assert eval(out)[3] == "source"


def test_refuses_a_short_pipe_with_exit_3():
    whole = SHARE + make_blob(probe_source(0, "bytecode"), magic_of(PYTHON))
    for handover in (b"", SHARE[:100], SHARE, whole[:700]):
        code, out, err = run_loader(lambda _: handover)
        assert code == 3 and "cannot load the bootstrap from the handover pipe" in err, (len(handover), code, err)
        assert out == "", out  # nothing of the bootstrap ran


def main():
    print(f"loader: {os.path.join(RUNTIME, 'bootstrap_loader_windows.py')}\ninterpreter: {PYTHON}")
    passed = failed = 0
    for name, test in [(n, t) for n, t in globals().items() if n.startswith("test_") and callable(t)]:
        try:
            test()
        except Exception:
            failed += 1
            print(f"FAIL {name}\n{traceback.format_exc()}")
        else:
            passed += 1
            print(f"ok   {name}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
