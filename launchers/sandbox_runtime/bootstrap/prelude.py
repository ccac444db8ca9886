# psych bootstrap: the first and only Python code that runs in the sandboxed child.
#
# The bootstrap is this folder's files run as ONE module: compile_bootstrap.py joins them in its
# ORDER (this prelude first, main.py last) into one source, compiled once at build time into the
# one code object the launcher hands the child. So every part shares these globals, a part may use
# at its top level only what an earlier part defined, and nothing is imported from this folder at
# run time: the sandbox holds no file of it. This file holds what every part uses: the imports,
# the process-wide state, ProtocolError and observe.
#
# The launcher execs `<python> -I -S -c <loader> TOKEN CANARY IPV4_PORT IPV6_PORT WORKSPACE [prepared]`
# with cwd = the workspace, fd 0 = /dev/null, fds 1/2 = the host's stdout and stderr pipes,
# fd 3 = the channel (docs/contract.md) and fd 4 = the bootstrap, precompiled; the loader
# (bootstrap_loader.py) closes fd 4 and runs it in its globals. Before reading anything it sends
# `hello` with what it observes of its own containment, then waits for `abort` or `run`
# (a prepared sandbox first gets `lower_limits`, lowers its rlimits and answers `lowered`:
# docs/pools.md), runs exactly one program and answers `done`. Nothing of the program is parsed before
# `run`, and a failing program is reported as data, never as a crash of the bootstrap.
#
# Every execution pays the bootstrap's startup, so the path to `return 1` imports only built-in
# or C modules: `posix`, not `os` (os drags in ~2 ms of pure-Python modules); `_json`, not
# `json` (json imports `re`); `_ast`, not `ast`; `_socket`, not `socket`. asyncio, traceback
# and linecache are imported only by the programs and failures that need them. `_ast` is
# imported once hello has gone, while the host grades it: its ~1 ms (creating the node types)
# is due anyway, as the first compile() of anything creates them in CPython 3.11. The launcher
# passes the bootstrap precompiled; run as source (the tests run the joined source), it is
# compiled on every start, which is one more reason it stays small.
#
# On Windows (docs/windows-launcher.md) the launcher runs `<python.exe> -I -S -c <loader> TOKEN
# HANDOVER CANARY IPV4_PORT IPV6_PORT WORKSPACE`; that loader (bootstrap_loader_windows.py) reads the
# handover pipe, drops HANDOVER from sys.argv and sets CHANNEL_SHARE, the channel's WSAPROTOCOL_INFOW,
# in these globals. The channel is then a socket, hello describes a Job Object instead of rlimits
# and namespaces, and what has no Windows form (process groups, uids, /proc) reads as unset.
# Windows-only modules (_winapi, ctypes) are imported only in Windows branches.

import sys
WINDOWS = sys.platform == "win32"
if WINDOWS:
    import nt as posix  # the same functions; there its environ has str keys
else:
    import posix
import errno
import builtins
import _json

# Untouched pages: free to hold, released when a failure needs room to be described. bytes,
# not bytearray: bytes(n) is calloc'd and never touched, bytearray(n) writes every page (~1.5 ms).
MEMORY_RESERVE = [bytes(2 << 20)]
BOOTSTRAP_GLOBALS = globals()  # tells our frames from the program's, even if both say "<string>"
BOOTSTRAP_MODULE = sys.modules["__main__"]  # kept alive once the program takes over __main__


class ProtocolError(Exception):  # the host broke the contract or left: nobody to report to
    pass


def observe(read, fallback):
    # A failed observation becomes a value the host grades as "not shown": an unreadable
    # /proc is itself something the host should see, not a reason to send no hello.
    try:
        return read()
    except Exception:
        return fallback
