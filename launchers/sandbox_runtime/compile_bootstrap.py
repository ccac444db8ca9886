# Precompiles the bootstrap at build time, so no execution pays for compiling it.
#
#   python3 compile_bootstrap.py bootstrap.py bootstrap.blob
#
# The blob, which the launcher hands the child as fd 4 and bootstrap_loader.py reads:
#
#   magic    4 bytes   this interpreter's import MAGIC_NUMBER (the bytecode format's version)
#   length   4 bytes   little-endian length of the code that follows
#   code     length    marshal.dumps(compile(source, "<psych-bootstrap>", "exec", optimize=2))
#   source   the rest  bootstrap.py itself, UTF-8
#
# The code is only valid for interpreters with the same magic; any other one (another
# minor version) compiles the source instead, which works, just slower. The test suite
# imports make_blob to build blobs with a wrong magic on purpose.
import marshal
import os
import sys
from importlib.util import MAGIC_NUMBER

FILENAME = "<psych-bootstrap>"  # what the bootstrap's own frames say in a traceback


def make_blob(source, magic=MAGIC_NUMBER):
    # optimize=2 drops the docstrings (the bootstrap asserts nothing): less to unmarshal per start.
    code = marshal.dumps(compile(source, FILENAME, "exec", dont_inherit=True, optimize=2))
    return magic + len(code).to_bytes(4, "little") + code + source


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: compile_bootstrap.py BOOTSTRAP_SOURCE OUTPUT_BLOB")
    with open(argv[1], "rb") as source_file:
        source = source_file.read()
    blob = make_blob(source)
    with open(argv[2] + ".tmp", "wb") as output:
        output.write(blob)
    os.replace(argv[2] + ".tmp", argv[2])


if __name__ == "__main__":
    main(sys.argv)
