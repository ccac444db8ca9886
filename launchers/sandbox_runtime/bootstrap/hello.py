# hello: what the child observes of its own containment, sent before it reads anything, so the
# host grades the sandbox it actually got (docs/grading.md). The POSIX report, and the probes a
# Windows report makes too (the canary, the loopback listeners); the Job Object is hello_windows.py's.
# A prepared sandbox's lower_limits is here as well: it reads the rlimits back the way hello does.

PROBE_TIMEOUT_SECONDS = 0.2
# On Windows Winsock's numbers, read as the test child reads them (tests/windows_launcher/test_child/report.cpp).
if WINDOWS:
    PROBE_OUTCOMES = {0: "connected", 10061: "refused",  # WSAECONNREFUSED
                      10013: "denied",  # WSAEACCES
                      10035: "timeout"}  # WSAEWOULDBLOCK: CPython's own connect timeout; the child's never times out
else:
    PROBE_OUTCOMES = {0: "connected", errno.ECONNREFUSED: "refused", errno.ENETUNREACH: "unreachable",
                      errno.EHOSTUNREACH: "unreachable", errno.EADDRNOTAVAIL: "unreachable",
                      errno.EAGAIN: "timeout",  # how CPython's connect_ex reports its own timeout
                      errno.ETIMEDOUT: "timeout", errno.EPERM: "denied", errno.EACCES: "denied",
                      errno.EAFNOSUPPORT: "denied"}


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


EGRESS_PROBE_HOST = b"psych-egress-probe.invalid"  # RFC 6761: never resolves, so never reached
EGRESS_PROBE_TIMEOUT_SECONDS = 2.0


def probe_egress(port):
    """network=allowlist: asks psych's egress proxy, inside the sandbox's own namespace, for a host
    no allowlist names; it must answer with an HTTP error (403). Never anything but 127.0.0.1."""
    if port == 0:
        return {"outcome": "skipped", "status": 0, "error_number": 0}
    import _socket
    sock = None
    try:
        sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        sock.settimeout(EGRESS_PROBE_TIMEOUT_SECONDS)  # the proxy answers before it resolves anything
        code = sock.connect_ex(("127.0.0.1", port))
        if code != 0:
            return {"outcome": "unreachable", "status": 0, "error_number": code}
        target = EGRESS_PROBE_HOST + b":443"
        sock.sendall(b"CONNECT " + target + b" HTTP/1.1\r\nHost: " + target + b"\r\n\r\n")
        head = b""
        while b"\r\n" not in head and len(head) < 4096:
            piece = sock.recv(4096)
            if not piece:
                break
            head += piece
        fields = head.split(b"\r\n", 1)[0].split(b" ")
        status = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else 0
        outcome = "allowed" if 200 <= status < 300 else "refused" if status == 403 else "error"
        return {"outcome": outcome, "status": status, "error_number": 0}
    except (OSError, ValueError) as error:
        return {"outcome": "error", "status": 0, "error_number": error_number(error, errno.EIO)}
    finally:
        if sock is not None:
            sock.close()


def containment_report(canary, ipv4_port, ipv6_port, workspace, egress_port=0):
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
                    "ipv6": probe_loopback("AF_INET6", "::1", ipv6_port),
                    "proxy": probe_egress(egress_port)},
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
