# psych bootstrap loader on Windows: the Windows launcher's `-c` argument (docs/contract.md,
# "Channels on Windows"). sys.argv is ["-c", TOKEN, HANDOVER, CANARY, IPV4_PORT, IPV6_PORT,
# WORKSPACE]; HANDOVER is the one handle besides stdio the child inherits, the read end of the
# handover pipe, which holds the channel's WSAPROTOCOL_INFOW and then the bootstrap blob (what
# compile_bootstrap.py made: magic, length, marshalled code, source) up to end of file. It leaves
# the channel's share bytes in CHANNEL_SHARE, takes HANDOVER out of sys.argv (the bootstrap reads
# the same arguments as on POSIX) and runs the bootstrap in these globals.
import sys, _winapi, marshal

SHARE_BYTES = 628  # sizeof(WSAPROTOCOL_INFOW), the same for 32- and 64-bit processes


def read_handover(handle):
    # _winapi rather than a C runtime descriptor: nothing of the pipe outlives this function.
    data = bytearray()
    try:
        while chunk := _winapi.ReadFile(handle, 1 << 16)[0]:
            data += chunk
    except BrokenPipeError:  # how an anonymous pipe says the launcher closed its end
        pass
    finally:
        _winapi.CloseHandle(handle)  # before any of the bootstrap runs: the program never holds it
    return bytes(data)


def load():
    data = read_handover(int(sys.argv.pop(2)))
    share, blob = data[:SHARE_BYTES], memoryview(data)[SHARE_BYTES:]
    end = 8 + int.from_bytes(blob[4:8], "little")
    if len(share) < SHARE_BYTES or len(blob) < end:
        raise ValueError(f"{len(data)} bytes, fewer than the channel and the bootstrap's header promise")
    if blob[:4] == sys.modules["_frozen_importlib_external"].MAGIC_NUMBER:
        return share, marshal.loads(blob[8:end])
    # Another bytecode version than the build's: the source still works, compiled here.
    return share, compile(bytes(blob[end:]), "<psych-bootstrap>", "exec", dont_inherit=True)


try:
    CHANNEL_SHARE, bootstrap_code = load()
except Exception as error:
    sys.stderr.write(f"psych bootstrap loader: cannot load the bootstrap from the handover pipe: {error!r}\n")
    raise SystemExit(3) from None
del load, read_handover
exec(bootstrap_code)  # in these globals: the bootstrap tells its frames from the program's by them
