# Joins the bootstrap's parts into one source and precompiles it at build time, so no execution
# pays for compiling it and the child runs one module, as if it had been written as one file.
#
#   python3 compile_bootstrap.py PARTS_DIR OUTPUT_BLOB OUTPUT_SOURCE
#
# OUTPUT_SOURCE is the joined bootstrap.py, for whatever runs the bootstrap as source (the
# benchmarks); the tests call join() themselves. The blob, which the launcher hands the child as
# fd 4 and bootstrap_loader.py reads:
#
#   magic    4 bytes   this interpreter's import MAGIC_NUMBER (the bytecode format's version)
#   length   4 bytes   little-endian length of the code that follows
#   code     length    marshal.dumps(compile(source, "<psych-bootstrap>", "exec", optimize=2))
#   source   the rest  the joined bootstrap, UTF-8
#
# The code is only valid for interpreters with the same magic; any other one (another
# minor version) compiles the source instead, which works, just slower. The test suite
# imports make_blob to build blobs with a wrong magic on purpose.
import marshal
import os
import sys
from importlib.util import MAGIC_NUMBER

FILENAME = "<psych-bootstrap>"  # what the bootstrap's own frames say in a traceback
PARTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bootstrap")
# The parts in the order they run, top to bottom of one module: a part's top level may use only
# what an earlier part defined (its functions reach every part's names when they are called). The
# prelude's imports and shared state come first; main.py, which calls main(), comes last.
ORDER = ("prelude.py", "hello.py", "hello_windows.py", "channel.py", "bindings.py", "program.py",
         "flusher.py", "done.py", "main.py")


def join(directory=PARTS_DIR):
    """The bootstrap's source: the parts in ORDER, each after the first under a line naming its
    file, so a line number in a traceback of the joined source leads back to a part. The first
    begins the source as it is: the source opens with the prelude's "# psych bootstrap:" header,
    which tests/launcher/fd_report.cpp looks for to tell a whole blob."""
    present = sorted(name for name in os.listdir(directory) if name.endswith(".py"))
    if present != sorted(ORDER):  # a part that is not listed would silently be left out
        raise ValueError(f"{directory} holds {present}, but compile_bootstrap.ORDER lists {list(ORDER)}")
    parts = []
    for name in ORDER:
        with open(os.path.join(directory, name), "rb") as part:
            marker = f"# ---- bootstrap/{name} ----\n".encode() if parts else b""
            parts.append(marker + part.read())
    return b"\n\n".join(parts)


def make_blob(source, magic=MAGIC_NUMBER):
    # optimize=2 drops the docstrings (the bootstrap asserts nothing): less to unmarshal per start.
    code = marshal.dumps(compile(source, FILENAME, "exec", dont_inherit=True, optimize=2))
    return magic + len(code).to_bytes(4, "little") + code + source


def write(path, data):
    with open(path + ".tmp", "wb") as output:
        output.write(data)
    os.replace(path + ".tmp", path)


def main(argv):
    if len(argv) != 4:
        sys.exit("usage: compile_bootstrap.py PARTS_DIR OUTPUT_BLOB OUTPUT_SOURCE")
    source = join(argv[1])
    write(argv[3], source)
    write(argv[2], make_blob(source))


if __name__ == "__main__":
    main(sys.argv)
