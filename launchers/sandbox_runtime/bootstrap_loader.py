# psych bootstrap loader: the launcher's `-c` argument. It loads the bootstrap from fd 4
# (the blob compile_bootstrap.py made: magic, length, marshalled code, source) and runs
# it in these globals, with sys.argv as the launcher passed it. The interpreter compiles
# only these few lines at start; the bootstrap's own code is unmarshalled (~0.4 ms), not
# compiled from its source (~6 ms).
import sys, posix, marshal


def load(fd=4):
    # One read of the exact size (the memfd is sealed: it cannot grow or shrink), not reads into
    # a 1 MiB buffer, and no copy of the code before unmarshalling it.
    size, blob = posix.fstat(fd).st_size, b""
    while len(blob) < size and (chunk := posix.read(fd, size - len(blob))):
        blob += chunk
    posix.close(fd)  # before any of the bootstrap runs: the program never sees fd 4
    end = 8 + int.from_bytes(blob[4:8], "little")
    if len(blob) < end:
        raise ValueError(f"{len(blob)} bytes, fewer than the header promises")
    if blob[:4] == sys.modules["_frozen_importlib_external"].MAGIC_NUMBER:
        return marshal.loads(memoryview(blob)[8:end])
    # Another bytecode version than the build's: the source still works, compiled here.
    return compile(blob[end:], "<psych-bootstrap>", "exec", dont_inherit=True)


try:
    bootstrap_code = load()
except Exception as error:
    posix.write(2, f"psych bootstrap loader: cannot load the bootstrap from fd 4: {error!r}\n".encode())
    raise SystemExit(3) from None
del load
exec(bootstrap_code)  # in these globals: the bootstrap tells its frames from the program's by them
