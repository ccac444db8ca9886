"""psych_runtime's PEP 517 build backend: a wheel of the Python sources and of the C++ build.

psych_runtime is not a Python project with some C++ in it but a face of psych's C++ library, so
CMake is what compiles (the `psych_python` target, beside the launcher and the CLI it ships), and
this backend only packs what the build tree holds into a wheel. It lives in the source tree and
needs nothing but the standard library (`requires = []`), so that `pip install --no-index ./python`
works offline, where no setuptools or scikit-build could be downloaded, and so that Debian's
`python3 -m build --wheel --no-isolation python/` works too.

Where the build tree is: $PSYCH_BUILD_DIR, else build/ in the psych checkout this file is part of.
A relative $PSYCH_BUILD_DIR is taken from the checkout's root, since pip runs this backend in
python/, not where the command was typed. The wheel holds what the build tree holds when it is made;
a missing piece is built first, a stale one is not rebuilt (build the targets to refresh them).
"""

from __future__ import annotations

import base64
import csv
import gzip
import hashlib
import io
import os
import re
import shlex
import stat
import subprocess
import sys
import sysconfig
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

# python/_psych_build/backend.py: python/ is the project, its parent the psych checkout. Found from
# this file rather than the working directory, which is the frontend's to choose.
PROJECT_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = PROJECT_DIR.parent
PACKAGE = "psych_runtime"
DIST_NAME = "psych-runtime"
# The distribution name as wheel and sdist file names and the .dist-info directory spell it.
FILE_NAME = "psych_runtime"
SUMMARY = "Run a model-written program in a real sandbox: the Python face of psych"
# Only if the checkout's CMakeLists.txt does not say it (it always should).
FALLBACK_VERSION = "0.1.0"

# The CMake targets the wheel needs, for the message and the build of a missing one.
TARGETS = ("psych_python", "psych", "psych-remote", "psych-launch-linux")

_INSTALL_HINT = (
    "psych_runtime is built from a psych source checkout: its wheel holds the C++ extension, the "
    "CLI and the launcher that CMake builds there. Install with `pip install ./python` from a psych "
    "checkout (a source distribution holds only the Python sources)"
)


class BuildError(RuntimeError):
    """A build that cannot go on, with what to do about it; the frontend prints the message."""


@dataclass(frozen=True)
class Compiled:
    """One piece of the C++ build copied into the package."""

    built: str  # relative to the build tree
    packaged: str  # relative to the package
    target: str  # the CMake target that makes it


def _ext_suffix() -> str:
    # The file name this interpreter imports an extension module from (.cpython-311-x86_64-linux-gnu.so).
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    if not suffix:
        raise BuildError(f"{sys.executable} does not say which extension modules it loads (no EXT_SUFFIX)")
    return suffix


def _compiled() -> list[Compiled]:
    # The executables keep the layout they have installed (bin/ and libexec/psych/), because they
    # find each other by relative paths compiled into them: psych runs ../libexec/psych/psych-remote
    # and looks for ../libexec/psych/psych-launch-linux from its own directory, and psych-remote
    # finds the launcher beside itself (docs/cli.md, "Two executables"). So libexec/ must be a
    # sibling of _bin/ and keep its name; psych-remote sits beside the launcher, not in _bin/.
    return [
        Compiled(f"python/_psych{_ext_suffix()}", f"_psych{_ext_suffix()}", "psych_python"),
        Compiled("apps/psych", "_bin/psych", "psych"),
        Compiled("libexec/psych/psych-remote", "libexec/psych/psych-remote", "psych-remote"),
        Compiled("libexec/psych/psych-launch-linux", "libexec/psych/psych-launch-linux", "psych-launch-linux"),
    ]


# --- The checkout and its version ---------------------------------------------------------------


def _cmake_project() -> str:
    """The checkout's top-level CMakeLists.txt, refused unless it is psych's."""
    lists = REPO_DIR / "CMakeLists.txt"
    try:
        text = lists.read_text(encoding="utf-8")
    except OSError as error:
        raise BuildError(f"{lists} cannot be read ({error.strerror}). {_INSTALL_HINT}.") from None
    if not re.search(r"\bproject\s*\(\s*psych\b", text):
        raise BuildError(f"{lists} is not psych's (it declares no project(psych ...)). {_INSTALL_HINT}.")
    return text


def _version() -> str:
    # One version for the C++ package and the Python one: the project() line's.
    found = re.search(r"\bproject\s*\(\s*psych\b[^)]*?\bVERSION\s+([0-9]+(?:\.[0-9]+)*)", _cmake_project())
    return found.group(1) if found else FALLBACK_VERSION


def _metadata(version: str) -> str:
    # Core metadata 2.1; no dependencies: the package needs the standard library and what it ships.
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {DIST_NAME}\n"
        f"Version: {version}\n"
        f"Summary: {SUMMARY}\n"
        "Classifier: Operating System :: POSIX :: Linux\n"
        "Classifier: Typing :: Typed\n"
        "\n"
        "psych runs a program written by a language model in a real sandbox and hands back the "
        "result as data. psych_runtime is its Python face, a pybind11 extension over the C++ "
        "library together with the launcher and the psych command line it runs.\n"
        "It is built from a psych source checkout (`pip install ./python`), which compiles the C++ "
        "parts with CMake.\n"
    )


# --- The build tree -----------------------------------------------------------------------------


def _build_dir() -> Path:
    configured = os.environ.get("PSYCH_BUILD_DIR")
    if configured:
        return (REPO_DIR / configured).resolve()  # an absolute path stays as it is
    return REPO_DIR / "build"


def _missing(build: Path) -> list[Compiled]:
    return [piece for piece in _compiled() if not (build / piece.built).is_file()]


def _build_missing(build: Path, missing: list[Compiled]) -> None:
    """Build what is missing: scripts/setup in the checkout's own build/, CMake in another one."""
    targets = [piece.target for piece in missing]
    if build.resolve() == (REPO_DIR / "build").resolve():
        # scripts/setup installs the Debian packages psych needs and configures build/ the way
        # scripts/test does, so the wheel holds what the test suite tests.
        command = [str(REPO_DIR / "scripts" / "setup"), *targets]
    elif (build / "CMakeCache.txt").is_file():
        # Someone else's configuration (a sanitized build, another generator): built as it is.
        command = ["cmake", "--build", str(build), "--target", *targets]
    else:
        return  # nothing to build with; _collect names what is missing and how to get it
    print(f"psych_runtime: building {', '.join(targets)}: {shlex.join(command)}", file=sys.stderr, flush=True)
    # The build's output goes to stderr: on stdout a frontend may expect only its own protocol.
    status = subprocess.run(command, cwd=REPO_DIR, stdout=sys.stderr, check=False).returncode
    if status != 0:
        raise BuildError(f"`{shlex.join(command)}` failed with status {status}; its output is above")


def _collect(build: Path) -> list[tuple[str, Path]]:
    """(path in the package, file in the build tree) of every compiled piece, building what is missing."""
    missing = _missing(build)
    if missing:
        _build_missing(build, missing)
        missing = _missing(build)
    if missing:
        lines = [f"  {build / piece.built} (CMake target {piece.target})" for piece in missing]
        if build.resolve() == (REPO_DIR / "build").resolve():
            how = f"build them with `scripts/setup {' '.join(TARGETS)}` in {REPO_DIR}"
        else:
            how = (f"configure {build} with CMake (`cmake -S {REPO_DIR} -B {build}`) and build them with "
                   f"`cmake --build {build} --target {' '.join(TARGETS)}`")
        how += ", or point PSYCH_BUILD_DIR at a build tree that has them"
        if any(piece.target == "psych_python" for piece in missing):
            others = sorted(path.name for path in (build / "python").glob("_psych*") if path.is_file())
            if others:
                # Built, but for another interpreter: its EXT_SUFFIX names another Python version.
                how += (
                    f". {build / 'python'} holds {', '.join(others)}, an extension for another Python: "
                    f"this one ({sys.executable}) imports _psych{_ext_suffix()}; configure the build with "
                    "this interpreter, or install with the one it was built for"
                )
        raise BuildError("psych_runtime's wheel needs what is missing from the build tree:\n"
                         + "\n".join(lines) + f"\n{how}.")
    return [(piece.packaged, build / piece.built) for piece in _compiled()]


# --- The wheel ----------------------------------------------------------------------------------


def _wheel_tag() -> str:
    """interpreter-abi-platform of this interpreter, as pip will match it (cp311-cp311-linux_x86_64)."""
    impl = {"cpython": "cp", "pypy": "pp"}.get(sys.implementation.name, sys.implementation.name)
    interpreter = f"{impl}{sys.version_info.major}{sys.version_info.minor}"
    # The ABI from the extension's own suffix, which is what actually limits where it loads:
    # .cpython-311-x86_64-linux-gnu.so is cp311, .cpython-311d-... a debug build's cp311d.
    soabi = _ext_suffix().split(".")[1] if _ext_suffix().count(".") >= 2 else ""
    if sys.implementation.name == "cpython" and soabi.startswith("cpython-"):
        abi = "cp" + soabi.split("-")[1]
    elif soabi:
        abi = re.sub(r"[-.]", "_", soabi.rsplit("-", 2)[0] if soabi.count("-") >= 2 else soabi)
    else:
        abi = "none"
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{interpreter}-{abi}-{platform}"


def _source_epoch() -> int:
    # Reproducible archives: SOURCE_DATE_EPOCH when the caller sets it, else the oldest date a zip
    # can hold (1980-01-01), so two builds of the same tree differ in nothing but what changed.
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    return max(int(epoch), _ZIP_EPOCH) if epoch.isdigit() else _ZIP_EPOCH


_ZIP_EPOCH = 315532800


def _record_hash(digest: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class _WheelWriter:
    """A zip with a RECORD line per member, and the mode each member is to be installed with."""

    def __init__(self, path: Path) -> None:
        self._zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self._records: list[tuple[str, str, str]] = []
        self._date = time.gmtime(_source_epoch())[:6]

    def _info(self, name: str, mode: int, size: int) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(name, date_time=self._date)
        # pip (and any installer) applies the Unix mode in the upper half of external_attr; an
        # executable must arrive as 0755 or the package cannot run its launcher.
        info.external_attr = (stat.S_IFREG | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        info.file_size = size
        return info

    def add_bytes(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._zip.writestr(self._info(name, mode, len(data)), data)
        self._records.append((name, _record_hash(hashlib.sha256(data).digest()), str(len(data))))

    def add_file(self, name: str, source: Path, mode: int = 0o644) -> None:
        # Streamed: the executables are tens of megabytes each.
        digest = hashlib.sha256()
        size = source.stat().st_size
        # The size is known up front, so zipfile picks ZIP64 itself for a member that needs it.
        with source.open("rb") as reader, self._zip.open(self._info(name, mode, size), "w") as writer:
            while chunk := reader.read(1 << 20):
                digest.update(chunk)
                writer.write(chunk)
        self._records.append((name, _record_hash(digest.digest()), str(size)))

    def close(self, record_name: str) -> None:
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerows(self._records)
        writer.writerow((record_name, "", ""))  # RECORD cannot hold its own hash
        self._zip.writestr(self._info(record_name, 0o644, len(text.getvalue().encode())), text.getvalue())
        self._zip.close()

    def discard(self) -> None:
        self._zip.close()


def _python_sources() -> list[tuple[str, Path]]:
    """(path in the package, source file) of every file of python/psych_runtime/."""
    package = PROJECT_DIR / PACKAGE
    compiled = {piece.packaged for piece in _compiled()}
    found = []
    for path in sorted(package.rglob("*")):
        relative = path.relative_to(package).as_posix()
        parts = relative.split("/")
        if not path.is_file() or "__pycache__" in parts or path.suffix in (".pyc", ".pyo"):
            continue
        # Editor and tool leftovers are not the package's.
        if any(part.startswith(".") for part in parts) or relative.endswith("~"):
            continue
        # A copy of a compiled piece left in the source tree (a developer's shortcut) would shadow
        # the build tree's, or be the wrong interpreter's: the wheel takes those from the build only.
        if relative in compiled or relative.split("/")[0] in ("_bin", "libexec") or \
                re.fullmatch(r"_psych\..*(\.so|\.pyd)", relative):
            continue
        found.append((relative, path))
    return found


def _dist_info(version: str) -> str:
    return f"{FILE_NAME}-{version}.dist-info"


def _write_metadata_files(directory: Path, version: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "METADATA").write_text(_metadata(version), encoding="utf-8")
    (directory / "top_level.txt").write_text(f"{PACKAGE}\n", encoding="utf-8")


# --- PEP 517 hooks ------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings=None) -> list[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None) -> str:
    # Cheap, and builds nothing: pip asks for the metadata before it asks for the wheel.
    version = _version()
    _write_metadata_files(Path(metadata_directory) / _dist_info(version), version)
    return _dist_info(version)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    version = _version()
    compiled = _collect(_build_dir())
    tag = _wheel_tag()
    name = f"{FILE_NAME}-{version}-{tag}.whl"
    dist_info = _dist_info(version)
    target = Path(wheel_directory) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".whl.partial")  # a failed build leaves no wheel that looks whole
    wheel = _WheelWriter(partial)
    try:
        sources = _python_sources()
        for relative, path in sources:
            wheel.add_file(f"{PACKAGE}/{relative}", path)
        if not any(relative == "py.typed" for relative, _ in sources):
            wheel.add_bytes(f"{PACKAGE}/py.typed", b"")  # PEP 561: the package's own types count
        for relative, path in compiled:
            wheel.add_file(f"{PACKAGE}/{relative}", path, mode=0o755)
        wheel.add_bytes(f"{dist_info}/METADATA", _metadata(version).encode("utf-8"))
        wheel.add_bytes(f"{dist_info}/WHEEL", (
            "Wheel-Version: 1.0\n"
            "Generator: psych_runtime in-tree backend (python/_psych_build)\n"
            # Not purelib: it holds an extension and executables for one interpreter and platform.
            "Root-Is-Purelib: false\n"
            f"Tag: {tag}\n").encode("utf-8"))
        wheel.add_bytes(f"{dist_info}/top_level.txt", f"{PACKAGE}\n".encode("utf-8"))
        wheel.close(f"{dist_info}/RECORD")
        partial.replace(target)
    except BaseException:
        wheel.discard()
        partial.unlink(missing_ok=True)
        raise
    return name


def build_sdist(sdist_directory, config_settings=None) -> str:
    # The Python half only: the C++ is the checkout's, and a wheel built from this archive stops
    # with _INSTALL_HINT (the parent of its directory is not a psych checkout).
    version = _version()
    base = f"{FILE_NAME}-{version}"
    name = f"{base}.tar.gz"
    members: list[tuple[str, Path]] = [("pyproject.toml", PROJECT_DIR / "pyproject.toml"),
                                       ("_psych_build/backend.py", Path(__file__).resolve())]
    members += [(f"{PACKAGE}/{relative}", path) for relative, path in _python_sources()]
    mtime = _source_epoch()
    target = Path(sdist_directory) / name
    target.parent.mkdir(parents=True, exist_ok=True)

    def normalized(info: tarfile.TarInfo) -> tarfile.TarInfo:
        # No builder's user names or dates in the archive.
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = mtime
        info.mode = 0o644
        return info

    # gzip's own header has a date too: the same one.
    with gzip.GzipFile(target, "wb", mtime=mtime) as compressed, \
            tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as archive:
        pkg_info = _metadata(version).encode("utf-8")
        info = normalized(tarfile.TarInfo(f"{base}/PKG-INFO"))
        info.size = len(pkg_info)
        archive.addfile(info, io.BytesIO(pkg_info))
        for relative, path in members:
            archive.add(path, arcname=f"{base}/{relative}", recursive=False, filter=normalized)
    return name
