# psych bootstrap: the first and only Python code that runs in the sandboxed child.
#
# The launcher execs `<python> -I -S -c <loader> TOKEN CANARY IPV4_PORT IPV6_PORT WORKSPACE [prepared]`
# with cwd = the workspace, fd 0 = /dev/null, fds 1/2 = the host's stdout and stderr pipes,
# fd 3 = the channel (docs/contract.md) and fd 4 = this file, precompiled; the loader
# (bootstrap_loader.py) closes fd 4 and runs this in its globals. Before reading anything it sends
# `hello` with what it observes of its own containment, then waits for `abort` or `run`
# (a prepared sandbox first gets `lower_limits`, lowers its rlimits and answers `lowered`:
# docs/pools.md), runs exactly one program and answers `done`. Nothing of the program is parsed before
# `run`, and a failing program is reported as data, never as a crash of the bootstrap.
#
# Every execution pays this file's startup, so the path to `return 1` imports only built-in
# or C modules: `posix`, not `os` (os drags in ~2 ms of pure-Python modules); `_json`, not
# `json` (json imports `re`); `_ast`, not `ast`; `_socket`, not `socket`. asyncio, traceback
# and linecache are imported only by the programs and failures that need them. `_ast` is
# imported once hello has gone, while the host grades it: its ~1 ms (creating the node types)
# is due anyway, as the first compile() of anything creates them in CPython 3.11. The launcher
# passes this file precompiled; run as source (the tests do), it is compiled on every start,
# which is one more reason it stays small.
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

CHANNEL_FD, PROTOCOL_EXIT_CODE = 3, 3
MAX_INCOMING_LINE, MAX_EMPTY_LINES = 64 << 20, 1000
MAX_FRAME_BYTES = 16 << 20  # the host's default bound on one channel frame
MAX_VALUE_DEPTH = 63  # the host allows 64 levels in a frame; the done object is one of them
MAX_ERROR_TEXT = 256 << 10  # per message/traceback, so a giant one cannot overflow the frame
PROBE_TIMEOUT_SECONDS = 0.2
FLUSH_INTERVAL_SECONDS = 0.05  # stdout/stderr reach the host at least this often (start_flusher); 0: never
PYCF_ONLY_AST, PYCF_ALLOW_TOP_LEVEL_AWAIT, CO_COROUTINE = 0x400, 0x2000, 0x80
RESULT_NAME = "__psych_result__"  # (value,) once the program returned or ended on an expression
DEFAULT_FILENAME = "<program>"
# Untouched pages: free to hold, released when a failure needs room to be described. bytes,
# not bytearray: bytes(n) is calloc'd and never touched, bytearray(n) writes every page (~1.5 ms).
MEMORY_RESERVE = [bytes(2 << 20)]
BOOTSTRAP_GLOBALS = globals()  # tells our frames from the program's, even if both say "<string>"
BOOTSTRAP_MODULE = sys.modules["__main__"]  # kept alive once the program takes over __main__
PROGRAM_NAMESPACE = {}  # the program's globals, once prepare_interpreter made them
if WINDOWS:  # Winsock's numbers, read as the test child reads them (tests/windows_launcher/test_child/report.cpp)
    PROBE_OUTCOMES = {0: "connected", 10061: "refused",  # WSAECONNREFUSED
                      10013: "denied",  # WSAEACCES
                      10035: "timeout"}  # WSAEWOULDBLOCK: CPython's own connect timeout; the child's never times out
else:
    PROBE_OUTCOMES = {0: "connected", errno.ECONNREFUSED: "refused", errno.ENETUNREACH: "unreachable",
                      errno.EHOSTUNREACH: "unreachable", errno.EADDRNOTAVAIL: "unreachable",
                      errno.EAGAIN: "timeout",  # how CPython's connect_ex reports its own timeout
                      errno.ETIMEDOUT: "timeout", errno.EPERM: "denied", errno.EACCES: "denied",
                      errno.EAFNOSUPPORT: "denied"}


# ---- hello: what the child observes of its own containment -----------------------------


class ProtocolError(Exception):  # the host broke the contract or left: nobody to report to
    pass


def observe(read, fallback):
    # A failed observation becomes a value the host grades as "not shown": an unreadable
    # /proc is itself something the host should see, not a reason to send no hello.
    try:
        return read()
    except Exception:
        return fallback


def raises(action):
    try:
        action()
    except Exception:
        return True
    return False


def error_number(error, fallback):
    # On Windows the Win32 or Winsock error (GetLastError, WSAGetLastError), as the launcher and the
    # test child report them there: CPython's errno is a lossy translation of it.
    return (WINDOWS and getattr(error, "winerror", None)) or getattr(error, "errno", None) or fallback


def read_file_text(path, size=1 << 16):
    fd = posix.open(path, posix.O_RDONLY | posix.O_NONBLOCK | posix.O_NOCTTY | posix.O_CLOEXEC)
    try:
        return posix.read(fd, size).decode("utf-8", "replace")
    finally:
        posix.close(fd)


RLIMITS = {"cpu_seconds": ("RLIMIT_CPU", "Max cpu time"), "address_space_bytes": ("RLIMIT_AS", "Max address space"),
           "file_size_bytes": ("RLIMIT_FSIZE", "Max file size"), "process_count": ("RLIMIT_NPROC", "Max processes"),
           "open_files": ("RLIMIT_NOFILE", "Max open files"), "core_bytes": ("RLIMIT_CORE", "Max core file size")}


def read_rlimits():
    # /proc/self/limits is the kernel's own rendering of the values getrlimit returns, and one
    # read of it spares loading the `resource` extension (~0.3 ms). Anything unexpected in it
    # (no /proc, another layout) falls back to getrlimit.
    try:
        found = {}
        for line in read_file_text("/proc/self/limits").splitlines():
            for field, (_, title) in RLIMITS.items():
                if line.startswith(title + " "):
                    found[field] = [-1 if value == "unlimited" else int(value) for value in line[len(title):].split()[:2]]
        if len(found) == len(RLIMITS) and all(len(pair) == 2 for pair in found.values()):
            return found
    except (OSError, ValueError):
        pass
    import resource
    return {field: [-1 if limit == resource.RLIM_INFINITY else limit
                    for limit in resource.getrlimit(getattr(resource, constant))]
            for field, (constant, _) in RLIMITS.items()}


def lower_limits(targets):
    """Lowers this process's rlimits to a claim's (soft values; RLIMIT_CPU's hard one a second
    above, as the launcher sets them), then reports what the kernel now says of them and of the
    cgroup's, which the launcher narrowed just before. A limit that cannot be lowered ends the
    bootstrap before any program arrives: a prepared sandbox is never run with more than asked."""
    if type(targets) is not dict:
        raise ProtocolError("lower_limits without an rlimits object")
    import resource
    for field, (constant, _) in RLIMITS.items():
        soft = targets.get(field, -1)
        if type(soft) is not int or soft < 0:
            continue
        hard = soft + 1 if field == "cpu_seconds" else soft
        try:
            resource.setrlimit(getattr(resource, constant), (soft, hard))
        except (OSError, ValueError) as error:
            raise ProtocolError(f"cannot lower {constant} to {soft}: {error}") from None
    return {"type": "lowered", "rlimits": read_rlimits(),
            "cgroup_memory_limit": read_cgroup_limit(("memory/memory.limit_in_bytes", "memory.max")),
            "cgroup_pids_limit": read_cgroup_limit(("pids/pids.max", "pids.max"))}


def probe_canary(path):
    try:
        if WINDOWS:
            read_first_byte_win32(path)
        else:
            read_file_text(path, 1)  # one byte proves the exposure
    except OSError as error:
        return {"readable": False, "error_number": error_number(error, 0)}
    return {"readable": True, "error_number": 0}


def read_first_byte_win32(path):
    # CreateFile and ReadFile as the test child calls them, so a refusal carries the Win32 error:
    # nt.open goes through the C runtime, whose errors are errno values.
    import _winapi
    handle = _winapi.CreateFile(path, _winapi.GENERIC_READ, 1,  # FILE_SHARE_READ
                                _winapi.NULL, _winapi.OPEN_EXISTING, 0x80, _winapi.NULL)  # FILE_ATTRIBUTE_NORMAL
    try:
        _winapi.ReadFile(handle, 1)
    finally:
        _winapi.CloseHandle(handle)


def probe_loopback(family_name, address, port):
    """Knocks on the host's canary listener: only ever 127.0.0.1 or ::1, never anything routable."""
    if port == 0:
        return {"outcome": "skipped", "error_number": 0}
    import _socket
    try:
        sock = _socket.socket(getattr(_socket, family_name, -1), _socket.SOCK_STREAM)
    except OSError as error:  # socket() itself refused: only denial counts as denied here
        code = error_number(error, errno.EINVAL)
        return {"outcome": "denied" if PROBE_OUTCOMES.get(code) == "denied" else "error", "error_number": code}
    try:
        sock.settimeout(PROBE_TIMEOUT_SECONDS)  # a non-blocking connect, then a bounded poll
        code = sock.connect_ex((address, port))  # on Windows WSAGetLastError's number
    except (OSError, OverflowError, ValueError) as error:
        code = error_number(error, errno.EINVAL)
    finally:
        sock.close()
    return {"outcome": PROBE_OUTCOMES.get(code, "error"), "error_number": code}


NAMESPACE_KINDS = ("mnt", "pid", "net", "user", "ipc", "uts", "cgroup")


RTF_UP, RTF_REJECT = 0x0001, 0x0200


def usable_routes(text, flags_column, device_column):
    """Routes that are up, not reject routes, and not on lo: a new namespace's IPv6 table holds
    two unreachable placeholders on lo, and a container runtime brings its namespace's lo up with
    a route to ::1; neither leads out of the namespace."""
    count = 0
    for line in text.splitlines():
        fields = line.split()
        try:
            flags = int(fields[flags_column], 16)
            device = fields[device_column]
        except (IndexError, ValueError):
            continue  # the IPv4 table's header, or a line this parser does not know
        if flags & RTF_UP and not flags & RTF_REJECT and device != "lo":
            count += 1
    return count


def count_routes():
    """Usable IPv4 plus IPv6 routes; -1 when neither table can be read."""
    v4 = observe(lambda: usable_routes(read_file_text("/proc/net/route"), 3, 0), None)
    v6 = observe(lambda: usable_routes(read_file_text("/proc/net/ipv6_route"), 8, 9), None)
    return -1 if v4 is None and v6 is None else (v4 or 0) + (v6 or 0)


def read_cgroup_limit(names):
    """The execution's own cgroup limit as mounted at /sys/fs/cgroup inside; -1 if absent or "max"."""
    for name in names:
        text = observe(lambda: read_file_text("/sys/fs/cgroup/" + name).strip(), "")
        if text.isdigit():
            return int(text)
    return -1


def read_cgroup_cpu_usage():
    """The execution cgroup's CPU time in µs as mounted inside (v1 cpuacct.usage in ns, v2
    cpu.stat usage_usec); -1 when there is no accounting to read."""
    text = observe(lambda: read_file_text("/sys/fs/cgroup/cpuacct/cpuacct.usage").strip(), "")
    if text.isdigit():
        return int(text) // 1000
    for line in observe(lambda: read_file_text("/sys/fs/cgroup/cpu.stat"), "").splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec" and value.strip().isdigit():
            return int(value)
    return -1


def containment_report(canary, ipv4_port, ipv6_port, workspace):
    if WINDOWS:
        return windows_containment_report(canary, ipv4_port, workspace)
    status = observe(lambda: read_file_text("/proc/self/status"), "")
    status_fields = {key: value.strip() for key, _, value in (line.partition(":") for line in status.splitlines())}
    return {
        "pid": posix.getpid(), "ppid": posix.getppid(),
        "pgid": observe(lambda: posix.getpgid(0), -1), "sid": observe(lambda: posix.getsid(0), -1),
        "uid": posix.getuid(), "gid": posix.getgid(), "euid": posix.geteuid(), "egid": posix.getegid(),
        "groups": observe(posix.getgroups, []),
        "no_new_privs": status_fields.get("NoNewPrivs") == "1",  # unknown reads as not applied
        "seccomp_mode": observe(lambda: int(status_fields["Seccomp"]), -1),
        "rlimits": read_rlimits(),
        "canary": probe_canary(canary),
        "network": {"ipv4": probe_loopback("AF_INET", "127.0.0.1", ipv4_port),
                    "ipv6": probe_loopback("AF_INET6", "::1", ipv6_port)},
        "environment_keys": sorted(key.decode("utf-8", "replace") for key in posix.environ),
        "cwd": observe(posix.getcwd, ""),
        "cwd_is_workspace": observe(lambda: posix.stat(".")[1:3] == posix.stat(workspace)[1:3], False),
        "workspace_entries": observe(lambda: len(posix.listdir(".")), -1),
        # Observations the host compares with what it knows: its own namespace ids, the root
        # the launcher built, the ids it mapped, the cgroup limits it set.
        "namespace_ids": {kind: observe(lambda: posix.readlink("/proc/self/ns/" + kind), "") for kind in NAMESPACE_KINDS},
        "root_entries": observe(lambda: sorted(posix.listdir("/"))[:256], []),
        "uid_map": observe(lambda: " ".join(read_file_text("/proc/self/uid_map").split()), ""),
        "gid_map": observe(lambda: " ".join(read_file_text("/proc/self/gid_map").split()), ""),
        "capabilities_effective": status_fields.get("CapEff", ""),
        "capabilities_bounding": status_fields.get("CapBnd", ""),
        "network_routes": count_routes(),
        "cgroup_memory_limit": read_cgroup_limit(("memory/memory.limit_in_bytes", "memory.max")),
        "cgroup_pids_limit": read_cgroup_limit(("pids/pids.max", "pids.max")),
        "cgroup_cpu_usage_us": read_cgroup_cpu_usage(),
        "python": "%d.%d.%d" % sys.version_info[:3],
    }


# ---- hello on Windows: the Job Object, read from inside --------------------------------


def windows_containment_report(canary, ipv4_port, workspace):
    """hello in the shape of the Windows test child's (tests/windows_launcher/test_child/report.cpp), so
    the host grades both alike: what Windows has no form of (process groups, uids, seccomp,
    namespaces, cgroups) reads as unset, rlimits are the job's per-process limits, and `job` is the
    Job Object as it reads back from inside (docs/grading.md, "Windows")."""
    job, rlimits = observe(read_job, job_limits(None, None))
    return {
        "pid": posix.getpid(), "ppid": observe(posix.getppid, -1), "pgid": -1, "sid": -1,
        "uid": -1, "gid": -1, "euid": -1, "egid": -1, "groups": [],
        "no_new_privs": False, "seccomp_mode": -1,
        "rlimits": rlimits,
        "canary": probe_canary(canary),
        # Windows offers a process no network denial: the probe says what a connection does. IPv6
        # is skipped whatever its port, as the test child skips it: with nothing that could deny
        # one family and not the other, a second probe would show nothing more.
        "network": {"ipv4": probe_loopback("AF_INET", "127.0.0.1", ipv4_port),
                    "ipv6": {"outcome": "skipped", "error_number": 0}},
        # The C runtime's copy of the block, which leaves out names that begin with "=" (cmd.exe's
        # per-drive directories); the launcher's block holds none.
        "environment_keys": sorted(posix.environ),
        "cwd": observe(posix.getcwd, ""),
        # CPython fills st_dev and st_ino on Windows with the volume serial number and the file index.
        "cwd_is_workspace": observe(lambda: posix.stat(".")[1:3] == posix.stat(workspace)[1:3], False),
        "workspace_entries": observe(lambda: len(posix.listdir(".")), -1),
        "namespace_ids": {}, "root_entries": [], "uid_map": "", "gid_map": "",
        "capabilities_effective": "", "capabilities_bounding": "", "network_routes": -1,
        "cgroup_memory_limit": -1, "cgroup_pids_limit": -1, "cgroup_cpu_usage_us": -1,
        "python": "%d.%d.%d" % sys.version_info[:3],
        "job": job,
    }


def read_job():
    """(job, rlimits) of the Job Object this process runs in, read with the calls
    launchers/windows/job_readback.cpp makes (QueryInformationJobObject on no handle: the caller's
    own job), and IsProcessInJob for `in_job`, as the test child reports it."""
    import ctypes
    from ctypes import wintypes
    # A kernel32 of our own: prototypes set on ctypes.windll.kernel32 would be the program's too.
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    query = kernel32.QueryInformationJobObject
    query.argtypes = (wintypes.HANDLE, ctypes.c_int, wintypes.LPVOID, wintypes.DWORD, wintypes.LPDWORD)
    query.restype = wintypes.BOOL
    kernel32.GetCurrentProcess.argtypes, kernel32.GetCurrentProcess.restype = (), wintypes.HANDLE
    kernel32.IsProcessInJob.argtypes = (wintypes.HANDLE, wintypes.HANDLE, ctypes.POINTER(wintypes.BOOL))
    kernel32.IsProcessInJob.restype = wintypes.BOOL
    extended_type, ui_type = job_structures(ctypes)
    extended, ui = extended_type(), ui_type()
    read = query(None, 9, ctypes.byref(extended), ctypes.sizeof(extended), None)  # JobObjectExtendedLimitInformation
    # Not every Windows answers the UI query (Wine fails it): then the restrictions are not proven.
    ui_read = read and query(None, 4, ctypes.byref(ui), ctypes.sizeof(ui), None)  # JobObjectBasicUIRestrictions
    job, rlimits = job_limits(extended if read else None, ui.UIRestrictionsClass if ui_read else None)
    in_job = wintypes.BOOL()
    job["in_job"] = bool(kernel32.IsProcessInJob(kernel32.GetCurrentProcess(), None, ctypes.byref(in_job))
                         and in_job.value)
    return job, rlimits


def job_structures(ctypes):
    """JOBOBJECT_EXTENDED_LIMIT_INFORMATION and JOBOBJECT_BASIC_UI_RESTRICTIONS as winnt.h lays them
    out, in fixed-width types (DWORD 32 bits, LARGE_INTEGER and ULONGLONG 64, SIZE_T and ULONG_PTR a
    pointer's width) rather than wintypes', whose DWORD is a C long: 64 bits off Windows. So the
    layout can be checked on any 64-bit host (tests/bootstrap): 144 and 4 bytes."""
    dword, size_t = ctypes.c_uint32, ctypes.c_size_t

    class BasicLimits(ctypes.Structure):
        _fields_ = [("PerProcessUserTimeLimit", ctypes.c_int64), ("PerJobUserTimeLimit", ctypes.c_int64),
                    ("LimitFlags", dword), ("MinimumWorkingSetSize", size_t), ("MaximumWorkingSetSize", size_t),
                    ("ActiveProcessLimit", dword), ("Affinity", size_t), ("PriorityClass", dword),
                    ("SchedulingClass", dword)]

    class IoCounters(ctypes.Structure):
        _fields_ = [(name, ctypes.c_uint64) for name in ("ReadOperationCount", "WriteOperationCount",
                    "OtherOperationCount", "ReadTransferCount", "WriteTransferCount", "OtherTransferCount")]

    class ExtendedLimits(ctypes.Structure):
        _fields_ = [("BasicLimitInformation", BasicLimits), ("IoInfo", IoCounters), ("ProcessMemoryLimit", size_t),
                    ("JobMemoryLimit", size_t), ("PeakProcessMemoryUsed", size_t), ("PeakJobMemoryUsed", size_t)]

    class UiRestrictions(ctypes.Structure):
        _fields_ = [("UIRestrictionsClass", dword)]

    return ExtendedLimits, UiRestrictions


def job_limits(extended, ui_classes):
    """job_readback.cpp's rules over what the queries read back (None: the query failed): (job,
    rlimits). A flag or limit that reads back unset is false or -1, and is graded as absent; the
    per-process limits stand where a POSIX child reports rlimits, as [value, value]. Windows has no
    per-process cap on file size or open handles, and writes no core dumps."""
    job = {"in_job": False, "kill_on_close": False, "breakaway_forbidden": False, "ui_restricted": False,
           "active_processes_limit": -1, "memory_bytes": -1, "cpu_seconds": -1}
    rlimits = {field: [-1, -1] for field in ("cpu_seconds", "address_space_bytes", "file_size_bytes",
                                             "process_count", "open_files", "core_bytes")}
    if extended is None:
        return job, rlimits
    basic = extended.BasicLimitInformation
    flags = basic.LimitFlags

    def seconds(flag, ticks):  # job times are in 100 ns units; whole seconds, rounded up
        return -(-ticks // 10_000_000) if flags & flag and ticks > 0 else -1

    def size(flag, value):
        return value if flags & flag and value else -1

    job.update(kill_on_close=bool(flags & 0x2000),  # JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
               # A job that reads back no flags at all proves nothing about breakaway either.
               breakaway_forbidden=flags != 0 and not flags & (0x800 | 0x1000),  # BREAKAWAY_OK, SILENT_BREAKAWAY_OK
               ui_restricted=ui_classes is not None and ui_classes & 0xFF == 0xFF,  # every JOB_OBJECT_UILIMIT_*
               active_processes_limit=(basic.ActiveProcessLimit if flags & 0x8 and basic.ActiveProcessLimit > 0
                                       else -1),  # JOB_OBJECT_LIMIT_ACTIVE_PROCESS
               memory_bytes=size(0x200, extended.JobMemoryLimit),  # JOB_OBJECT_LIMIT_JOB_MEMORY
               cpu_seconds=seconds(0x4, basic.PerJobUserTimeLimit))  # JOB_OBJECT_LIMIT_JOB_TIME
    for field, value in (("cpu_seconds", seconds(0x2, basic.PerProcessUserTimeLimit)),  # ..._PROCESS_TIME
                         ("address_space_bytes", size(0x100, extended.ProcessMemoryLimit)),  # ..._PROCESS_MEMORY
                         ("process_count", job["active_processes_limit"])):
        rlimits[field] = [value, value]
    return job, rlimits


# ---- the channel: NDJSON frames over fd 3 (on Windows, a socket) ---------------------------


def refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def refuse_duplicate_keys(pairs):
    if len(obj := dict(pairs)) != len(pairs):
        raise ValueError("duplicate key")
    return obj


class ScannerSettings:
    """What _json.make_scanner reads from a json.JSONDecoder, without importing json (and re)."""
    strict, object_hook, parse_float, parse_int = True, None, float, int
    object_pairs_hook, parse_constant = staticmethod(refuse_duplicate_keys), staticmethod(refuse_constant)


SCAN_JSON = _json.make_scanner(ScannerSettings())


def refuse_unknown_type(obj):
    raise TypeError(f"{qualified_name(type(obj))} is not JSON serializable")


def new_encoder():
    # encode_basestring, not the _ascii variant: text travels as UTF-8, not \u escapes.
    return _json.make_encoder({}, refuse_unknown_type, _json.encode_basestring, None, ":", ",", False, False, False)


ENCODER = [new_encoder()]
ENCODE_STRING = _json.encode_basestring  # made once: making one costs more than encoding a small frame


def encode_json(value):
    try:
        return "".join(ENCODER[0](value, 0))
    except BaseException:
        ENCODER[0] = new_encoder()  # a failed encoding can leave its circularity markers behind
        raise


def frame_bytes(frame):
    # Reports may hold surrogate-escaped bytes (paths, messages): replace them, never fail.
    return (encode_json(frame) + "\n").encode("utf-8", "replace")


# Below malloc's mmap threshold: a 1 MiB read buffer is an mmap, a page fault and an mremap on
# every read, which cost a small frame's round trip several times over.
READ_CHUNK = 64 << 10


def parse_frame(line):
    try:
        text = line.decode("utf-8")
        frame, end = SCAN_JSON(text, 0)
    except Exception as error:  # the C scanner raises StopIteration/ValueError/SystemError
        raise ProtocolError(f"malformed frame ({type(error).__name__})") from None
    if end != len(text) or type(frame) is not dict or type(frame.get("type")) is not str:
        raise ProtocolError("frame is not one object with a string type")
    return frame


class Channel:
    def __init__(self, fd):
        self.fd, self.pending = fd, bytearray()  # pending keeps the bytes past one frame

    def read_some(self):
        return posix.read(self.fd, READ_CHUNK)

    def finish(self):  # after done: nothing to do for a descriptor the kernel closes with the process
        pass

    def write_some(self, view):
        return posix.write(self.fd, view)

    def send(self, data):
        view = memoryview(data)
        try:
            while view:
                view = view[self.write_some(view):]
        except OSError as error:
            raise ProtocolError(f"cannot write to the channel: {error}") from None

    def receive(self):
        for _ in range(MAX_EMPTY_LINES + 1):
            if line := self.read_line().strip(b" \t\r"):
                return parse_frame(line)
        raise ProtocolError("too many empty lines")

    def receive_ready(self):
        """The frames that one read completes, without blocking: for a reader the event loop
        calls when the channel is readable. Partial frames wait in `pending` for the next read."""
        if not (chunk := self.read_some()):
            raise ProtocolError("channel closed with calls in flight")
        self.pending += chunk
        frames = []
        while (newline := self.pending.find(b"\n")) >= 0:
            line = bytes(self.pending[:newline]).strip(b" \t\r")
            del self.pending[:newline + 1]
            if line:
                frames.append(parse_frame(line))
        if len(self.pending) > MAX_INCOMING_LINE:
            raise ProtocolError("frame too large")
        return frames

    def read_line(self):
        scanned = 0  # never search the same bytes twice: a long line stays linear
        while (newline := self.pending.find(b"\n", scanned)) < 0:
            if (scanned := len(self.pending)) > MAX_INCOMING_LINE:  # bounded as the bytes arrive
                raise ProtocolError("frame too large")
            if not (chunk := self.read_some()):
                raise ProtocolError("channel closed before a complete frame")
            self.pending += chunk
        if newline > MAX_INCOMING_LINE:
            raise ProtocolError("frame too large")
        line = bytes(self.pending[:newline])
        del self.pending[:newline + 1]
        return line


class SocketChannel(Channel):
    """Windows: the channel is the host's connection itself, shared with this process
    (docs/contract.md, "Channels on Windows"); the C runtime's read and write take no socket.
    `fd` is its handle, which a SelectorEventLoop watches as it watches fd 3 elsewhere."""

    def __init__(self, share):
        import _socket
        self.sock = _socket.socket(0, 0, 0, share)  # socket.fromshare, without importing socket
        # fromshare makes the socket with WSASocketW and no WSA_FLAG_NO_HANDLE_INHERIT: processes
        # the program starts with inherited handles (os.system, os.spawn*) must not hold it.
        posix.set_handle_inheritable(self.sock.fileno(), False)
        self.sock.setblocking(True)  # whatever mode the launcher's copy was in: reads wait for a frame
        super().__init__(self.sock.fileno())

    def read_some(self):
        return self.sock.recv(READ_CHUNK)

    def finish(self):
        # Windows resets a TCP connection closed with unread bytes (results of calls the program
        # gave up on), and a reset can overtake `done` on its way to the host: end the sending side
        # with a FIN behind `done`, then take what has already arrived, without waiting for more.
        try:
            self.sock.shutdown(1)  # SD_SEND
            self.sock.setblocking(False)
            while self.sock.recv(READ_CHUNK):
                pass
        except OSError:  # WSAEWOULDBLOCK: nothing more is queued; or the host has already gone
            pass

    def write_some(self, view):
        return self.sock.send(view)


def open_channel():
    if not WINDOWS:
        posix.set_inheritable(CHANNEL_FD, False)  # processes the program starts must not hold it
        return Channel(CHANNEL_FD)
    share = BOOTSTRAP_GLOBALS.get("CHANNEL_SHARE")  # set by the Windows loader; see the note at the top
    if type(share) is not bytes:
        raise ProtocolError("no channel was handed over (CHANNEL_SHARE is not set)")
    return SocketChannel(share)


# ---- bindings: the program's calls of the agent's tools (docs/bindings.md) --------------

CHANNEL = None  # the channel, once main() opened it: calls travel on it between run and done


class ToolError(Exception):
    """A call of a tool that produced no result. Branch on .kind (a closed set: unknown_tool,
    excluded_builtin, denied, budget_exhausted, tool_failed, ...: the host's tool_error_kind,
    listed in docs/kinds.md), never on the message. .tool is the name that was called."""

    def __init__(self, kind, tool, message=""):
        super().__init__(message)
        self.kind, self.tool = kind, tool

    def __str__(self):
        return f"{self.kind}: {self.tool}: {self.args[0] if self.args else ''}"


class ToolResultHandle:
    """A result too large to hand over whole, preserved on the host. Read it in windows of its
    text (the result pretty-printed): `await handle.read(offset=0, limit=100)` for lines, or
    `pattern="regex"` to search. A window wider than the per-call ceiling is refused with
    binding_result_too_large: ask for fewer lines."""

    __slots__ = ("handle", "size", "lines", "tool", "_call_tool")

    def __init__(self, tool, info, call_tool):
        self.tool, self._call_tool = tool, call_tool
        self.handle, self.size, self.lines = info.get("handle"), info.get("size_bytes"), info.get("lines")

    def read(self, offset=0, limit=100, pattern=None):
        arguments = {"handle": self.handle, "offset": offset, "limit": limit}
        if pattern is not None:
            arguments["pattern"] = pattern
        return ToolCall("handle.read", self._call_tool, ("read_tool_output", arguments), sys._getframe(1))

    def __repr__(self):
        return f"<ToolResultHandle of {self.tool}: {self.size} bytes, {self.lines} lines>"


def tool_error_of(reply, name):
    error = reply.get("error") if type(reply.get("error")) is dict else {}
    return ToolError(error.get("kind", "tool_failed"), error.get("tool", name), error.get("message", ""))


class Calls:
    """The program's calls on the channel. Without a running event loop each call is one blocking
    round trip (no asyncio import, and no concurrency needed: nothing can gather). Under asyncio a
    call is a future of the running loop: the channel is watched with add_reader and each result
    resolves its future by id, so calls gathered together are in flight together, and a call the
    program gives up on is cancelled on the host. On Windows only a SelectorEventLoop can watch the
    channel: under a ProactorEventLoop (asyncio's default there, made by the program's own
    asyncio.run) each call is a blocking round trip."""

    def __init__(self):
        self.call_tool = None  # for the handles results may come as
        self.next_id = 0
        self.waiting = {}      # id -> (future, name), under asyncio
        self.abandoned = set()  # ids whose result nobody waits for any more
        self.watched = None    # the loop whose reader is on the channel

    def start(self, name, arguments):
        self.next_id += 1
        try:  # by hand around the arguments: a call's frame is the per-call cost a loop pays
            encoded = encode_json(arguments) if arguments else "{}"
        except (TypeError, ValueError, RecursionError) as error:
            raise ToolError("malformed_call", name, f"arguments cannot travel as JSON: {error}") from None
        CHANNEL.send(f'{{"type":"call","id":{self.next_id},"tool":{ENCODE_STRING(name)},"arguments":{encoded}}}\n'
                     .encode("utf-8", "replace"))
        return self.next_id

    def round_trip(self, name, arguments):
        call_id = self.start(name, arguments)
        while True:
            reply = CHANNEL.receive()
            if reply.get("type") != "result":
                raise ProtocolError(f"expected the result of call {call_id}, got {reply.get('type')!r}")
            if reply.get("id") == call_id:
                return self.settle(reply, name)
            if reply.get("id") not in self.abandoned:
                raise ProtocolError(f"expected the result of call {call_id}, got one for {reply.get('id')!r}")
            self.abandoned.discard(reply.get("id"))

    def settle(self, reply, name):
        if reply.get("ok") is True:
            if type(reply.get("handle")) is dict:
                return ToolResultHandle(name, reply["handle"], self.call_tool)
            return reply.get("value")
        raise tool_error_of(reply, name)

    def in_loop(self, loop, name, arguments):
        call_id = self.start(name, arguments)
        future = loop.create_future()
        self.waiting[call_id] = (future, name)
        future.add_done_callback(lambda done: self.given_up(call_id, done))
        if self.watched is not loop:  # watched for the loop's life: two epoll_ctl per call cost more than a call
            if self.watched is not None:
                observe(lambda: self.watched.remove_reader(CHANNEL.fd), None)
            loop.add_reader(CHANNEL.fd, self.readable)
            self.watched = loop
        return future

    def given_up(self, call_id, future):
        if future.cancelled() and self.waiting.pop(call_id, None) is not None:
            self.abandoned.add(call_id)
            observe(lambda: CHANNEL.send(frame_bytes({"type": "cancel_call", "id": call_id})), None)

    def readable(self):
        try:
            replies = CHANNEL.receive_ready()
        except (ProtocolError, OSError) as error:
            for future, _ in self.waiting.values():
                future.set_exception(ProtocolError(str(error)))
            self.waiting.clear()
            observe(lambda: self.watched.remove_reader(CHANNEL.fd), None)  # a closed channel stays readable
            self.watched = None
            return
        for reply in replies:
            entry = self.waiting.pop(reply.get("id"), None) if reply.get("type") == "result" else None
            if entry is None:
                self.abandoned.discard(reply.get("id"))
                continue
            future, name = entry
            if not future.done():
                try:
                    future.set_result(self.settle(reply, name))
                except ToolError as error:
                    future.set_exception(error)


REPORTED_LINES = set()  # (file, line) of the calls already reported as not awaited: one report per line


class ToolCall:
    """What calling a tool returns: the call itself, made when it is awaited, alone
    (`await lookup(sku="A")`) or among others (`await asyncio.gather(...)`, a task). It is a
    coroutine as asyncio sees one. Using it as if it were the result (subscripting it, reading an
    attribute, iterating, printing, testing it) raises an error that says what to write, at the
    program's line; one dropped without being awaited is reported in stderr at the line that made
    it, instead of Python's "coroutine ... was never awaited" from inside the bootstrap."""

    __slots__ = ("_label", "_perform", "_arguments", "_coroutine", "_file", "_line", "_reported")

    def __init__(self, label, perform, arguments, caller):
        self._label, self._perform, self._arguments = label, perform, arguments
        self._coroutine, self._reported = None, False
        self._file, self._line = caller.f_code.co_filename, caller.f_lineno

    def _begin(self):
        if self._coroutine is None:
            self._coroutine = self._perform(*self._arguments)
        return self._coroutine

    def __await__(self):
        return self._begin().__await__()

    def send(self, value):
        return self._begin().send(value)

    def throw(self, *exception):
        return self._begin().throw(*exception)

    def close(self):
        if self._coroutine is None:
            self._reported = True  # given up before it started (a task cancelled early): nothing to say
        else:
            self._coroutine.close()

    def _complaint(self):
        self._reported = True
        REPORTED_LINES.add((self._file, self._line))
        call = f"{self._label}(...)"
        if self._coroutine is None:
            return f"{call} must be awaited: write `await {call}`; without await the tool is not called"
        return f"{call} is the call, not its result: write `result = await {call}` and use `result`"

    def _refuse(self, *_):
        raise TypeError(self._complaint()) from None

    def __getattr__(self, name):
        if name.startswith("__") or name in ToolCall.__slots__:  # introspection (hasattr), or mid-__init__
            raise AttributeError(name)
        raise AttributeError(self._complaint()) from None

    def __repr__(self):
        state = "not awaited" if self._coroutine is None else "awaited"
        return f"<ToolCall {self._label}(...), {state}: its result is `await {self._label}(...)`>"

    __hash__ = object.__hash__

    def __del__(self):
        try:
            if self._coroutine is None and not self._reported and (self._file, self._line) not in REPORTED_LINES:
                warn_unawaited(self._complaint().replace(" must be awaited:", " was never awaited:", 1),
                               self._file, self._line)
        except BaseException:  # at interpreter shutdown our globals may be gone: nobody reads stderr then
            pass


# Every use of a value a result would have. Not __next__: asyncio would take a ToolCall with one
# for an iterator and step it with next() instead of send().
for _name in ("getitem", "setitem", "delitem", "iter", "aiter", "len", "contains", "bool", "str", "format", "bytes",
              "int", "float", "complex", "index", "call", "enter", "exit", "aenter", "aexit", "eq", "ne", "lt", "le",
              "gt", "ge", "neg", "pos", "abs", "invert", "round",
              *(prefix + operator for prefix in ("", "r", "i") for operator in (
                  "add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "divmod", "pow", "lshift", "rshift",
                  "and", "or", "xor"))):
    setattr(ToolCall, f"__{_name}__", ToolCall._refuse)
del _name


def warn_unawaited(message, filename, line):
    """A RuntimeWarning at the program's line, through the program's warning filters; written
    plainly if those filters make it an error (a warning from a finalizer cannot raise)."""
    try:
        import _warnings
        _warnings.warn_explicit(message, RuntimeWarning, filename, line)
    except BaseException:
        observe(lambda: sys.stderr.write(f"{filename}:{line}: RuntimeWarning: {message}\n"), None)


def coroutine_never_started(obj):
    """True for a native coroutine that was made and never awaited (cr_suspended where the
    interpreter has it; before that, a frame that never ran had f_lasti -1)."""
    if type(obj) is not COROUTINE_TYPE or (frame := obj.cr_frame) is None or obj.cr_running:
        return False
    suspended = getattr(obj, "cr_suspended", None)
    return not suspended if suspended is not None else frame.f_lasti == -1


async def never_run():
    pass


COROUTINE_TYPE = type(_coroutine := never_run())
_coroutine.close()
del _coroutine


def report_unawaited(namespace):
    """Reports the calls and coroutines the program left in its globals without awaiting them,
    while the program's line can still be named: dropped later by the bootstrap, Python would name
    a line of the bootstrap instead."""
    for value in list(namespace.values()):
        if type(value) is ToolCall:
            value.__del__()
        elif coroutine_never_started(value):
            code = value.cr_code
            REPORTED_LINES.add((code.co_filename, code.co_firstlineno))
            warn_unawaited(f"coroutine '{value.__qualname__}' was never awaited: write `await "
                           f"{value.__name__}(...)`", code.co_filename, code.co_firstlineno)
            value.close()  # closed before it ran: Python has nothing more to say about it


def make_call_tool(excluded):
    """call_tool, and the coroutine function every binding's call runs when it is awaited."""
    calls, modules = Calls(), sys.modules

    async def perform(name, arguments=None, keywords=None):
        if type(name) is not str:
            raise ToolError("malformed_call", repr(name), "a tool's name is a string")
        if keywords:
            arguments = {**(arguments or {}), **keywords}
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ToolError("malformed_call", name, "arguments must be a dict")
        if name in excluded:
            raise ToolError("excluded_builtin", name, excluded[name])
        asyncio = modules.get("asyncio")  # per call, not per program: a loop may start at any time
        if asyncio is not None and (loop := asyncio._get_running_loop()) is not None:
            if not (WINDOWS and isinstance(loop, asyncio.ProactorEventLoop)):  # it has no add_reader
                return await calls.in_loop(loop, name, arguments)
        return calls.round_trip(name, arguments)

    def call_tool(name, arguments=None):
        """await call_tool(name, {...}): calls the tool of that model-facing name, whatever
        characters it has, with a dict of arguments; returns its JSON value or raises ToolError."""
        return ToolCall("call_tool", perform, (name, arguments), sys._getframe(1))

    calls.call_tool = perform
    return call_tool, perform


def make_builtins(perform):
    def list_tools(offset=0, limit=100):
        """await list_tools(): the offered tools, sorted by name, a window at a time: {"tools":
        [{name, description, deferred}], "total": N, "next_offset": N or None}. Read-only, bounded."""
        return ToolCall("list_tools", perform, ("list_tools", {"offset": offset, "limit": limit}), sys._getframe(1))

    def get_tool_info(name):
        """await get_tool_info(name): one offered tool's name, description and argument schema
        ("input_schema"): the way to a deferred tool's arguments."""
        return ToolCall("get_tool_info", perform, ("get_tool_info", {"name": name}), sys._getframe(1))

    def read_tool_output(handle, offset=0, limit=100, pattern=None):
        """await read_tool_output(handle, ...): a window of a result this program's own call
        received as a ToolResultHandle: lines from `offset`, at most `limit`, or only those
        matching `pattern`."""
        arguments = {"handle": handle.handle if isinstance(handle, ToolResultHandle) else handle,
                     "offset": offset, "limit": limit}
        if pattern is not None:
            arguments["pattern"] = pattern
        return ToolCall("read_tool_output", perform, ("read_tool_output", arguments), sys._getframe(1))

    return {"list_tools": list_tools, "get_tool_info": get_tool_info, "read_tool_output": read_tool_output}


def make_alias(perform, name):
    def alias(arguments=None, /, **keywords):
        return ToolCall(name, perform, (name, arguments, keywords), sys._getframe(1))
    alias.__name__ = alias.__qualname__ = name
    alias.__doc__ = f"await {name}(key=value, ...): call_tool({name!r}, {{...}})"
    return alias


def bind_tools(namespace, bindings, excluded):
    """TOOLS, call_tool, ToolError, and one alias per name that is a usable identifier and not a
    keyword: never a mangled one, so `list-repos` gets none and `list_repos` is the real one."""
    names = sorted({b["name"] for b in bindings if type(b) is dict and type(b.get("name")) is str})
    excluded = {e["name"]: e.get("reason", "") for e in excluded if type(e) is dict and type(e.get("name")) is str}
    call_tool, perform = make_call_tool(excluded)
    namespace.update(TOOLS=tuple(names), call_tool=call_tool, ToolError=ToolError, ToolResultHandle=ToolResultHandle,
                     **make_builtins(perform))
    if names:
        import keyword
        for name in names:
            if name.isidentifier() and not keyword.iskeyword(name):
                namespace[name] = make_alias(perform, name)


# ---- the program: parse, rewrite, compile, run ------------------------------------------


def located(node_type, at, **fields):
    return node_type(**fields, lineno=at.lineno, col_offset=at.col_offset,
                     end_lineno=at.end_lineno, end_col_offset=at.end_col_offset)


def store_result(at, value):
    return located(_ast.Assign, at, targets=[located(_ast.Name, at, id=RESULT_NAME, ctx=_ast.Store())],
                   value=located(_ast.Tuple, at, elts=[value], ctx=_ast.Load()))


class StrayLoopControl(Exception):  # a break/continue outside every loop, which our loop would make legal
    pass


def import_ast():
    """The AST node types every program's rewrite needs; see the note at the top on when."""
    global _ast, LOOPS
    import _ast
    LOOPS = (_ast.For, _ast.AsyncFor, _ast.While)


def rewrite_returns(block, in_loop):
    """Turns each top-level `return X` into `__psych_result__ = (X,); break`; says if any.

    The program runs inside a `while True:` of ours, so `break` leaves it as a return leaves a
    function: with-blocks exit cleanly (sqlite3 commits, a TaskGroup waits), finally-blocks
    run, a return in finally wins and no `except:` catches it, all of which a raised exception
    gets wrong. A return in a user's loop breaks that loop and a check after it breaks on out.
    """
    rewritten, returns = [], False
    for node in block:
        if isinstance(node, _ast.Return):
            value = node.value or located(_ast.Constant, node, value=None)
            rewritten += [store_result(node, value), located(_ast.Break, node)]
            returns = True
            continue
        if isinstance(node, (_ast.Break, _ast.Continue)) and not in_loop:
            raise StrayLoopControl()
        rewritten.append(node)
        if isinstance(node, (_ast.FunctionDef, _ast.AsyncFunctionDef, _ast.ClassDef)):
            continue
        inner = False
        for field in ("body", "orelse", "finalbody"):  # a loop's else clause is outside that loop
            if getattr(node, field, None):
                new_block, found = rewrite_returns(getattr(node, field), in_loop or (
                    field == "body" and isinstance(node, LOOPS)))
                setattr(node, field, new_block)
                inner |= found
        for clause in getattr(node, "handlers", []) + getattr(node, "cases", []):
            clause.body, found = rewrite_returns(clause.body, in_loop)
            inner |= found
        if inner and isinstance(node, LOOPS):
            rewritten.append(located(_ast.If, node, test=located(_ast.Name, node, id=RESULT_NAME, ctx=_ast.Load()),
                                     body=[located(_ast.Break, node)], orelse=[]))
        returns |= inner
    return rewritten, returns


def compile_program(source, filename):
    tree = compile(source, filename, "exec", PYCF_ONLY_AST | PYCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    body = tree.body
    if body and isinstance(body[-1], _ast.Expr):
        body[-1] = store_result(body[-1], body[-1].value)
    # A docstring and `from __future__` imports must come first, so they stay outside the loop.
    start = 1 if len(body) > 1 and isinstance(body[0], _ast.Expr) and isinstance(body[0].value, _ast.Constant) else 0
    while start < len(body) and isinstance(body[start], _ast.ImportFrom) and body[start].module == "__future__":
        start += 1
    try:
        rest, returns = rewrite_returns(body[start:], False)
    except StrayLoopControl:  # let the compiler name the program's first error, as Python would
        compile(source, filename, "exec", PYCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        raise SyntaxError("'break' outside loop") from None
    if returns:
        tree.body = body[:start] + [located(_ast.While, rest[0], test=located(_ast.Constant, rest[0], value=True),
                                            body=rest + [located(_ast.Break, rest[-1])], orelse=[])]
    return compile(tree, filename, "exec", PYCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)


def settle():
    """Hands everything that exists before the program to the GC's permanent generation. It all
    lives until exit, yet every full collection walked it again, the ones at shutdown included
    (~1.3 ms of each execution). What the program creates is collected as usual; the one visible
    difference is that gc.get_objects() and gc.get_referrers() no longer list these objects."""
    import gc
    gc.freeze()


def exit_program(code=None):
    """site's exit() and quit(): programs call them, and -S leaves them undefined."""
    raise SystemExit(code)


def prepare_interpreter(filename):
    """Gives the program installed packages and a real __main__, without paying for site."""
    global PROGRAM_NAMESPACE
    version = "python%d.%d" % sys.version_info[:2]
    if WINDOWS:  # where site puts them there, beside the standard library's Lib
        candidates = [sys.prefix + "\\Lib\\site-packages"]
    else:
        candidates = [f"{sys.prefix}/lib/{version}/site-packages"]
    if sys.prefix == "/usr":  # Debian's own interpreter keeps them in dist-packages
        candidates += [f"/usr/local/lib/{version}/dist-packages", "/usr/lib/python3/dist-packages",
                       f"/usr/lib/{version}/dist-packages"]
    for path in candidates:  # no .pth files: processing them is site's job, and its cost
        if path not in sys.path and observe(lambda: posix.stat(path).st_mode & 0o170000 == 0o040000, False):
            sys.path.append(path)
    key = "PYTHONDONTWRITEBYTECODE" if WINDOWS else b"PYTHONDONTWRITEBYTECODE"  # nt.environ's keys are str
    if posix.environ.get(key):  # -I ignores it, but the launch still asked
        sys.dont_write_bytecode = True
    sys.argv = [filename]
    if WINDOWS:  # a line ends with "\n" as on every backend, not os.linesep's "\r\n" (docs/contract.md)
        for stream in (sys.stdout, sys.stderr):
            observe(lambda: stream.reconfigure(newline="\n"), None)
    builtins.exit = builtins.quit = exit_program
    setattr(builtins, RESULT_NAME, ())  # what the after-loop checks read before any return ran
    main_module = type(sys)("__main__")  # so pickle and `import __main__` find the program's names
    main_module.__builtins__ = builtins
    sys.modules["__main__"] = main_module
    PROGRAM_NAMESPACE = main_module.__dict__
    return PROGRAM_NAMESPACE


def run_program(code, namespace, source):
    coroutine = eval(code, namespace)
    if not code.co_flags & CO_COROUTINE:
        return
    # asyncio costs ~50 ms to import. A program that imports nothing (no `import`, no
    # `__import__`, no importlib) cannot await anything that needs a loop, as long as the
    # host's bindings stay loop-free, so its coroutine is driven by hand instead.
    if "import" in source:
        import asyncio
        if WINDOWS:  # asyncio.run's loop there is a ProactorEventLoop, which cannot watch the channel
            with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
                return runner.run(coroutine)
        return asyncio.run(coroutine)
    try:
        yielded = coroutine.send(None)
        while True:  # a bare yield (asyncio.sleep(0)) only means "let others run": there are none
            yielded = coroutine.send(None) if yielded is None else coroutine.throw(RuntimeError(
                "awaited something that needs an event loop; one runs only when the program "
                "imports asyncio (or the library it awaits)"))
    except StopIteration:
        pass


# ---- output: what the program printed reaches the host's pipes while it runs -------------

FLUSHER = {"stop": None, "running": False}  # the lock that stops the flusher; whether its thread began


def start_flusher(interval=FLUSH_INTERVAL_SECONDS):
    """Starts a thread that flushes stdout and stderr every `interval` seconds, so that a program
    ended by the wall clock or a cancel has lost at most the last interval of its output, not a
    whole buffer (docs/output.md). A thread, not a signal: it works while the program sleeps or
    blocks in C code that releases the GIL, and whatever the program does with signals; a
    pure-Python loop that holds the GIL yields it every switch interval (5 ms). It flushes only
    the interpreter's own C stream types, which lock themselves; a stream object the program made
    in Python is never called from another thread. A fork waits for a flush in progress to end, so
    a child never inherits a stream's lock held by a thread it does not have. None if the thread
    cannot start (process_count reached): then output is flushed at the end only, as before."""
    if interval <= 0:
        return None
    import _thread
    import _io
    stop, guard, flushable = _thread.allocate_lock(), _thread.allocate_lock(), (_io.TextIOWrapper, _io.BufferedWriter)
    stop.acquire()

    def flush_every_interval():
        FLUSHER["running"] = True
        while not stop.acquire(True, interval):
            try:
                with guard:
                    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                        if type(stream) in flushable:
                            try:
                                stream.flush()
                            except Exception:  # closed, or a write the program's own flush will report
                                pass
            except BaseException:
                pass

    if WINDOWS:
        # Neither the mask nor the fork guard below: Windows never hands a signal to a thread of its
        # choosing (a console event gets a thread of its own, and CPython runs every handler on the
        # main thread), and it has no fork to copy a stream's lock the flusher holds into a child.
        try:
            _thread.start_new_thread(flush_every_interval, ())
        except RuntimeError:
            return None
        return stop
    # Born with every signal blocked, so a signal sent to the process still goes to the program's
    # threads: one the program blocks (SIGXCPU, SIGTERM) stays pending instead of being taken by the
    # flusher, whose default action would end the process.
    import _signal
    mask = _signal.pthread_sigmask(_signal.SIG_BLOCK, _signal.valid_signals())
    try:
        _thread.start_new_thread(flush_every_interval, ())
    except RuntimeError:
        return None
    finally:
        _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)
    posix.register_at_fork(before=guard.acquire, after_in_parent=guard.release, after_in_child=guard.release)
    return stop


def stop_flusher():
    if FLUSHER["stop"] is not None:
        FLUSHER["stop"].release()
        FLUSHER["stop"] = None


# ---- done: the value, or the failure as data -----------------------------------------------


def qualified_name(cls):
    module, name = getattr(cls, "__module__", None), getattr(cls, "__qualname__", cls.__name__)
    return name if module in (None, "builtins", "__main__") else f"{module}.{name}"


def text_of(obj, convert=str, limit=MAX_ERROR_TEXT):
    text = observe(lambda: convert(obj), f"<unprintable {type(obj).__name__} object>")
    half = limit // 2  # both ends matter: a traceback's first frames and its final line
    if len(text) <= limit:
        return text
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters omitted ...]\n{text[-half:]}"


def error_frame(kind, type_name, message, traceback_text="", line=0, limit_hint=""):
    return frame_bytes({"type": "done", "ok": False, "error": {
        "kind": kind, "type": type_name, "message": text_of(message), "traceback": text_of(traceback_text),
        "line": line, "limit_hint": limit_hint}})


PROCESS_CREATORS = {"fork", "forkpty", "_fork_exec", "fork_exec", "_execute_child", "posix_spawn",
                    "posix_spawnp", "_posix_spawn", "_launch", "spawn"}
if WINDOWS:  # _winapi.CreateProcess: subprocess's _execute_child, multiprocessing's Popen there
    PROCESS_CREATORS.add("CreateProcess")


def creates_processes(error):
    """True if the innermost frame is a helper that creates processes, or calls os.fork & co."""
    innermost = error.__traceback__
    while innermost is not None and innermost.tb_next is not None:
        innermost = innermost.tb_next
    code = innermost.tb_frame.f_code if innermost else None
    return code is not None and (code.co_name in PROCESS_CREATORS or not PROCESS_CREATORS.isdisjoint(code.co_names))


def limit_hint(error):
    """Names the cap that an exception in the chain most likely hit, or ""."""
    pending, seen = [error], set()
    while pending:
        current = pending.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, MemoryError):
            return "memory_bytes"
        if isinstance(current, OSError) and current.errno == errno.EFBIG:
            return "file_size_bytes"
        if WINDOWS:
            # A job past its active process limit refuses CreateProcess with ERROR_NOT_ENOUGH_QUOTA,
            # which CPython's errno calls ENOMEM. A job counts processes, not threads.
            if isinstance(current, OSError) and current.winerror == 1816 and creates_processes(current):
                return "process_count"
        elif (isinstance(current, OSError) and current.errno == errno.EAGAIN and creates_processes(current)
                or isinstance(current, RuntimeError) and current.args == ("can't start new thread",)):
            return "process_count"  # RLIMIT_NPROC counts threads too
        pending += [current.__cause__, current.__context__]
    return ""


def describe_exception(error, filename, source):
    import linecache
    import traceback
    # Registered only now: a traceback needs the program's lines, a success never does.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    traceback.clear_frames(error.__traceback__)  # frame locals: the rest of a MemoryError's memory

    def in_program(tb):
        return tb.tb_frame.f_code.co_filename == filename and tb.tb_frame.f_globals is not BOOTSTRAP_GLOBALS

    first = error.__traceback__
    while first is not None and first.tb_frame.f_globals is BOOTSTRAP_GLOBALS:
        first = first.tb_next  # our own frames
    start = first
    while start is not None and not in_program(start):
        start = start.tb_next  # asyncio's machinery above the program's first frame
    first, line, tb = start or first, 0, start
    while tb is not None:
        line, tb = (tb.tb_lineno or 0) if in_program(tb) else line, tb.tb_next
    error.__traceback__ = without_bootstrap_frames(first)
    pending, seen = [error.__cause__, error.__context__], {id(error)}
    while pending:  # and from the exceptions it was raised from or while handling
        if (chained := pending.pop()) is not None and id(chained) not in seen:
            seen.add(id(chained))
            chained.__traceback__ = without_bootstrap_frames(chained.__traceback__)
            pending += [chained.__cause__, chained.__context__]
    name = qualified_name(type(error))
    text = text_of(error, lambda e: "".join(traceback.format_exception(type(e), e, e.__traceback__)))
    return error_frame("exception", name, text_of(error), text, line, limit_hint(error))


def without_bootstrap_frames(tb):
    """The traceback with none of the bootstrap's frames: the program reached a binding, a
    ToolCall, a refusal through them, and none of that is anything it can change."""
    kept = []
    while tb is not None:
        if tb.tb_frame.f_globals is not BOOTSTRAP_GLOBALS:
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = type(entry)(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def describe_syntax_error(error, source):
    import traceback
    line = (error.lineno or 0) if isinstance(error, SyntaxError) else 0
    if isinstance(error, SyntaxError) and error.text is None and 0 < line <= source.count("\n") + 1:
        error.text = source.splitlines()[line - 1]  # errors found compiling the tree carry no source line
    text = text_of(error, lambda e: "".join(traceback.format_exception_only(type(e), e)))
    return error_frame("syntax_error", qualified_name(type(error)), text_of(error), text, line)


def find_unserializable(item, check_strings, depth=1, ancestors=None):
    """(type name, complaint, path keys innermost first) for what JSON cannot carry, or None.

    Needed even when the C encoder succeeds: it turns int/float/bool/None keys into strings
    and nests without bound. Unlike the encoder, it also says where the problem is.
    """
    if isinstance(item, str):
        if check_strings and raises(lambda: item.encode("utf-8")):
            return "str", "contains a lone surrogate, which UTF-8 cannot encode", []
        return None
    if item is None or isinstance(item, bool):
        return None
    if isinstance(item, int):  # near 4300 digits, ask the conversion itself: the limit is settable
        if item.bit_length() > 14000 and raises(lambda: int.__repr__(item)):
            return "int", (f"is an int with more than {sys.get_int_max_str_digits()} digits, Python's limit "
                           "for writing it as text; return str(n) or a smaller number"), []
        return None
    if isinstance(item, float):
        return None if item - item == 0 else ("float", f"is {item!r}, which JSON cannot represent", [])
    type_name = qualified_name(type(item))
    if type(item) is ToolCall:
        return type_name, f"is a call, not its result: {item._complaint()}", []
    if not isinstance(item, (dict, list, tuple)):
        return type_name, f"is of type {type_name}, which JSON cannot represent", []
    ancestors = set() if ancestors is None else ancestors
    if id(item) in ancestors:
        return type_name, "contains itself (a circular reference)", []
    if depth > MAX_VALUE_DEPTH:
        return type_name, f"is nested deeper than {MAX_VALUE_DEPTH} levels", []
    ancestors.add(id(item))
    is_object, problem = isinstance(item, dict), None
    for key, child in item.items() if is_object else enumerate(item):
        if is_object and not isinstance(key, str):
            key_type = qualified_name(type(key))
            problem = key_type, f"has the key {short_repr(key)} of type {key_type}; JSON object keys must be str", []
            break
        kind = type(child)  # the common scalars are settled here, without a call per element
        if not check_strings and (kind is str or kind is bool or child is None or kind is int
                                  and child.bit_length() <= 14000 or kind is float and child - child == 0):
            continue
        if problem := (check_strings and is_object and find_unserializable(key, True, depth)
                       or find_unserializable(child, check_strings, depth + 1, ancestors)):
            problem[2].append(key)
            break
    ancestors.discard(id(item))
    return problem


def short_repr(obj):
    return text_of(obj, repr, 80)


def value_frame(value):
    """The encoded `done` for a value, or for the reason the value cannot travel."""
    def refuse(type_name, complaint, keys=(), hint=""):
        path = "value" + "".join(f"[{short_repr(key)}]" for key in reversed(keys))
        return error_frame("value_not_serializable", type_name, f"{path} {complaint}", limit_hint=hint)

    try:
        if problem := find_unserializable(value, False):
            return refuse(*problem)
        data = (encode_json({"type": "done", "ok": True, "value": value}) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        surrogate = observe(lambda: find_unserializable(value, True), None)
        return refuse(*(surrogate or ("str", "contains a lone surrogate")))
    except BaseException as error:  # a hostile __repr__ or items(), a MemoryError
        name = qualified_name(type(error))
        return refuse(name, f"could not be encoded: {name}: {text_of(error)}", hint=limit_hint(error))
    if len(data) > MAX_FRAME_BYTES:
        return refuse(qualified_name(type(value)),
                      f"is {len(data)} bytes as JSON; a frame carries at most {MAX_FRAME_BYTES}")
    return data


def execute(source, filename, bindings=(), excluded=()):
    """Runs one program and returns its encoded `done` frame: every failure becomes data."""
    namespace = prepare_interpreter(filename)
    bind_tools(namespace, bindings, excluded)
    try:
        code = compile_program(source, filename)
    except (SyntaxError, ValueError) as error:  # ValueError: NUL bytes or surrogates in the source
        return describe_syntax_error(error, source)
    except BaseException as error:  # RecursionError or MemoryError on a pathological source
        return describe_exception(error, filename, source)
    FLUSHER["stop"] = start_flusher()
    try:
        run_program(code, namespace, source)
    except SystemExit as exit_request:
        exit_code = exit_request.code  # as for a script, only None or integer 0 is a clean exit
        if not (exit_code is None or isinstance(exit_code, int) and exit_code == 0):
            observe(lambda: report_unawaited(namespace), None)
            return describe_exception(exit_request, filename, source)
    except BaseException as error:
        # A program that ran out of memory still holds it all: let its data and our reserve go,
        # or importing traceback to describe the MemoryError fails the same way.
        if not isinstance(error, MemoryError):
            observe(lambda: report_unawaited(namespace), None)
        namespace.clear()
        MEMORY_RESERVE.clear()
        return describe_exception(error, filename, source)
    result = namespace.pop(RESULT_NAME, ())
    observe(lambda: report_unawaited(namespace), None)
    return value_frame(result[0] if type(result) is tuple and len(result) == 1 else None)


def release_program():
    """Before a quick exit: drops the program's globals and collects its cycles, so what shutdown
    would have done for the program's objects (a file left open in a global is flushed and
    closed, a __del__ runs) has happened before `done`, and before the host reads the workspace."""
    import gc
    import _io
    # A file left open inside a reference cycle would otherwise lose its buffer: the collector
    # finalizes a cycle's objects in no useful order, and a raw file closed before its text
    # wrapper drops what the wrapper held. So every open file is flushed first, text layers
    # before the buffers beneath them. gc lists only what the program made (settle() froze ours).
    layers = [obj for obj in gc.get_objects() if isinstance(obj, (_io._TextIOBase, _io._BufferedIOBase))]
    layers.sort(key=lambda layer: not isinstance(layer, _io._TextIOBase))
    for layer in layers:
        observe(layer.flush, None)
    del layers
    observe(PROGRAM_NAMESPACE.clear, None)
    observe(gc.collect, None)


def nothing_left_to_finalize():
    """True when shutdown would do nothing for the program beyond releasing its objects: no thread
    it started is alive (shutdown joins them) and nothing is registered with atexit (logging,
    multiprocessing and tempfile clean-up register there, and their callbacks may still need
    the program's globals). Then the child releases the program itself and ends with _exit,
    which skips the ~1 ms of tearing down the interpreter's own modules."""
    import _thread
    import atexit
    # The flusher's thread counts once it began (and it never ends before stop_flusher): read the
    # count first, so a thread that begins in between can only make the answer "no".
    threads = _thread._count()
    return threads == (1 if FLUSHER["running"] else 0) and atexit._ncallbacks() == 0


def main():
    if len(sys.argv) < 6 or sys.argv[6:] not in ([], ["prepared"]):
        posix.write(2, b"psych bootstrap: expected TOKEN CANARY IPV4_PORT IPV6_PORT WORKSPACE [prepared]\n")
        raise SystemExit(PROTOCOL_EXIT_CODE)
    token, canary, ipv4_port, ipv6_port, workspace = sys.argv[1:6]
    prepared = len(sys.argv) == 7
    global CHANNEL
    try:
        if not (ipv4_port.isdigit() and ipv6_port.isdigit()):
            raise ProtocolError(f"bad probe ports {ipv4_port!r} {ipv6_port!r}")
        if prepared and WINDOWS:  # its launcher refuses them: a job's limits are the launcher's to set
            raise ProtocolError("a prepared sandbox is not offered on Windows")
        channel = CHANNEL = open_channel()
        report = containment_report(canary, int(ipv4_port), int(ipv6_port), workspace)
        channel.send(frame_bytes({"type": "hello", "token": token, "report": report}))
        import_ast()  # while the host grades hello: nothing of the program has arrived yet
        if prepared:
            import resource  # lower_limits' (about 1 ms), loaded while the sandbox waits for its claim
        settle()
        frame = channel.receive()
        if frame["type"] == "lower_limits":  # a prepared sandbox, claimed (docs/pools.md)
            channel.send(frame_bytes(lower_limits(frame.get("rlimits"))))
            frame = channel.receive()
        if frame["type"] == "abort":
            return
        program, filename = frame.get("program"), frame.get("filename")
        if frame["type"] != "run" or type(program) is not str:
            raise ProtocolError(f"expected run or abort, got {frame['type']!r}")
        bindings, excluded = frame.get("bindings"), frame.get("excluded")
        done = execute(program, filename if type(filename) is str and filename else DEFAULT_FILENAME,
                       bindings if type(bindings) is list else (), excluded if type(excluded) is list else ())
        quick_exit = nothing_left_to_finalize()
        if quick_exit:
            release_program()
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            observe(lambda: stream.flush(), None)  # before done: the host may stop reading pipes after it
        stop_flusher()
        channel.send(done)
        channel.finish()
        if quick_exit:
            posix._exit(0)
    except (ProtocolError, OSError) as error:
        complaint = f"psych bootstrap: {error}\n".encode("utf-8", "replace")
        observe(lambda: posix.write(2, complaint), None)
        raise SystemExit(PROTOCOL_EXIT_CODE) from None


main()
