# hello on Windows: the Job Object, read from inside, in the shape the Windows test child reports,
# so the host grades a Windows child as it grades a POSIX one. The bootstrap calls none of it off
# Windows, where ctypes and _winapi are never imported (tests/bootstrap check its pure parts anywhere).


def windows_containment_report(canary, ipv4_port, workspace):
    """hello in the shape of the Windows test child's
    (tests/windows_launcher/test_child/report.cpp), so the host grades both alike: what Windows has
    no form of (process groups, uids, seccomp, namespaces, cgroups) reads as unset, rlimits are the
    job's per-process limits, and `job` is the Job Object as it reads back from inside
    (docs/grading.md, "Windows")."""
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
