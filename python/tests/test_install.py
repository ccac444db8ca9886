"""psych_runtime as pip installs it: the package carries its own launcher, psych and psych-remote,
finds them from where it is (a moved virtualenv still works), and the wheel the in-tree backend
writes is whole (every member in RECORD, with its hash and size; executables 0755).

These run inside the virtualenv python/tests/run-pytest installs the package into, so sys.prefix is
that virtualenv and sys.executable its interpreter.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import io
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("PSYCH_BUILD_DIR") or REPO / "build").resolve()
EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")

# Where the wheel puts each executable, and where the build tree has it.
EXECUTABLES = {
    "libexec/psych/psych-launch-linux": "libexec/psych/psych-launch-linux",
    "_bin/psych": "apps/psych",
    "libexec/psych/psych-remote": "libexec/psych/psych-remote",
}

pytestmark = pytest.mark.skipif(
    sys.prefix == sys.base_prefix,
    reason="needs the virtualenv python/tests/run-pytest installs psych_runtime into",
)


def clean_environment() -> dict[str, str]:
    # Without the variables that would choose another launcher or another psych_runtime, so a
    # test sees only what the installation itself finds.
    return {name: value for name, value in os.environ.items()
            if name not in ("PSYCH_LAUNCHER", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def is_within(path: str | Path, directory: Path) -> bool:
    return Path(path).resolve().is_relative_to(directory.resolve())


@pytest.fixture
def paths(monkeypatch):
    """psych_runtime._paths as installed, with $PSYCH_LAUNCHER unset."""
    monkeypatch.delenv("PSYCH_LAUNCHER", raising=False)
    from psych_runtime import _paths

    return _paths


@pytest.fixture
def scratch():
    """A directory outside the build tree and the checkout, removed afterwards (a copied virtualenv
    holds some 130 MB of executables, which pytest's kept tmp_path directories would pile up)."""
    directory = Path(tempfile.mkdtemp(prefix="psych-python-install-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_installed_package_is_the_virtualenvs_not_the_source_tree(paths):
    package = paths.package_dir()
    assert is_within(package, Path(sys.prefix)), f"{package} is not in the virtualenv {sys.prefix}"
    assert not is_within(package, REPO / "python"), f"{package} is the source tree's, not the installed one"
    assert (package / f"_psych{EXT_SUFFIX}").is_file()
    assert (package / "py.typed").is_file()


@pytest.mark.parametrize("function", ["launcher_path", "psych_executable", "psych_remote_executable"])
def test_installed_executable_is_inside_the_package_and_executable(paths, function):
    found = Path(getattr(paths, function)())
    assert found.is_absolute()
    assert is_within(found, paths.package_dir()), f"{found} is not inside {paths.package_dir()}"
    assert found.is_file() and os.access(found, os.X_OK), f"{found} is not an executable file"
    assert found.stat().st_mode & 0o777 == 0o755


@pytest.mark.parametrize("packaged, built", sorted(EXECUTABLES.items()))
def test_installed_executable_is_the_build_trees(paths, packaged, built):
    installed = paths.package_dir() / packaged
    assert installed.resolve() != (BUILD / built).resolve()
    assert sha256(installed) == sha256(BUILD / built), f"{installed} differs from {BUILD / built}"


def test_psych_launcher_variable_comes_first(paths, monkeypatch):
    other = paths.psych_executable()  # any executable file will do: it is only located, not run
    monkeypatch.setenv("PSYCH_LAUNCHER", other)
    assert paths.launcher_path() == other
    monkeypatch.setenv("PSYCH_LAUNCHER", str(REPO / "no-such-launcher"))
    with pytest.raises(FileNotFoundError, match="PSYCH_LAUNCHER names .*no-such-launcher"):
        paths.launcher_path()
    monkeypatch.setenv("PSYCH_LAUNCHER", "")  # empty is unset, as the C++ library has it
    assert is_within(paths.launcher_path(), paths.package_dir())


def test_damaged_installation_names_the_file_and_the_remedy(paths, tmp_path, monkeypatch):
    # A copy of the installed _paths.py in a package directory that lacks the executables.
    package = tmp_path / "psych_runtime"
    package.mkdir()
    shutil.copy(paths.__file__, package / "_paths.py")
    spec = importlib.util.spec_from_file_location("damaged_paths", package / "_paths.py")
    damaged = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(damaged)
    launcher = package / "libexec" / "psych" / "psych-launch-linux"

    with pytest.raises(FileNotFoundError) as missing:
        damaged.launcher_path()
    assert str(launcher) in str(missing.value) and "is missing" in str(missing.value)
    assert "pip install ./python" in str(missing.value)

    launcher.parent.mkdir(parents=True)
    launcher.write_bytes(b"")
    launcher.chmod(0o644)
    with pytest.raises(FileNotFoundError, match="is not executable: psych_runtime was installed without its launcher"):
        damaged.launcher_path()
    with pytest.raises(FileNotFoundError, match="_bin/psych is missing"):
        damaged.psych_executable()


def test_installed_cli_finds_the_packaged_launcher(paths, tmp_path):
    # psych looks for ../libexec/psych/psych-launch-linux from its own directory: the wheel's
    # layout has to keep that, or the CLI it ships runs nothing.
    described = subprocess.run([paths.psych_executable(), "describe", "--json"], env=clean_environment(),
                               cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "launcher_unavailable" not in described.stdout, described.stdout
    assert json.loads(described.stdout)["chosen"]["launcher"] == paths.launcher_path()


def test_installed_cli_finds_the_packaged_psych_remote(paths, tmp_path):
    # psych execs ../libexec/psych/psych-remote for --remote. A closed port: psych-remote, if it
    # started, reports the service it could not reach; psych alone reports the execv that failed.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    program = tmp_path / "program.py"
    program.write_text("print('unreached')\n")
    ran = subprocess.run([paths.psych_executable(), "run", "--remote", f"https://127.0.0.1:{port}",
                          "--token-command", "echo token", "--connect-seconds", "1", str(program)],
                         env=clean_environment(), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    output = ran.stdout + ran.stderr
    assert "execv(" not in output, output
    assert f"127.0.0.1:{port}" in output, output
    assert ran.returncode != 0


def test_moved_virtualenv_runs_its_own_copies(scratch):
    # The whole virtualenv, copied as it is; the original stays, so a path that still led back to it
    # would work and has to be caught by where it points, not by failing.
    moved = scratch / "moved-venv"
    subprocess.run(["cp", "-a", sys.prefix, str(moved)], check=True)
    script = ("import psych_runtime._paths as p\n"
              "print(p.launcher_path()); print(p.psych_executable()); print(p.psych_remote_executable())\n"
              "print(p.package_dir())\n")
    ran = subprocess.run([str(moved / "bin" / "python"), "-c", script], env=clean_environment(), cwd=scratch,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    printed = ran.stdout.splitlines()
    assert len(printed) == 4, ran.stdout
    for path in printed:
        assert is_within(path, moved), f"{path} is not under the moved virtualenv {moved}"
        assert Path(path).exists()

    # And the moved psych runs the moved launcher.
    described = subprocess.run([printed[1], "describe", "--json"], env=clean_environment(), cwd=scratch,
                               capture_output=True, text=True, timeout=120)
    assert json.loads(described.stdout)["chosen"]["launcher"] == printed[0]


def build_frontend_missing(cwd: Path) -> str | None:
    # In a subprocess from a neutral directory: from the checkout's root, its build/ directory
    # would import as a namespace package named build.
    probe = subprocess.run([sys.executable, "-c", "import build.__main__"], cwd=cwd, capture_output=True, text=True)
    return None if probe.returncode == 0 else probe.stderr.strip().splitlines()[-1]


def test_wheel_from_python_build_is_whole(scratch):
    missing = build_frontend_missing(scratch)
    if missing:
        reason = f"python3-build is not installed ({missing})"
        pytest.skip(reason)
    out = scratch / "dist"
    built = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out),
                            str(REPO / "python")], cwd=scratch, capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout + built.stderr
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    wheel = wheels[0]
    # The tag pip matches: this interpreter's, as sysconfig has it.
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert wheel.name.endswith(f"-{platform}.whl") and f"-cp{sys.version_info[0]}{sys.version_info[1]}-" in wheel.name

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        dist_info = {name.split("/")[0] for name in names if name.split("/")[0].endswith(".dist-info")}
        assert len(dist_info) == 1, dist_info
        (dist_info,) = dist_info
        for required in [f"psych_runtime/_psych{EXT_SUFFIX}", "psych_runtime/_paths.py", "psych_runtime/py.typed",
                         *(f"psych_runtime/{packaged}" for packaged in EXECUTABLES),
                         f"{dist_info}/METADATA", f"{dist_info}/WHEEL", f"{dist_info}/top_level.txt"]:
            assert required in names, f"{required} is not in {wheel.name}"

        rows = list(csv.reader(io.StringIO(archive.read(f"{dist_info}/RECORD").decode("utf-8"))))
        recorded = {row[0]: row for row in rows}
        assert len(recorded) == len(rows), "RECORD names a file twice"
        assert set(recorded) == names, f"RECORD and the archive differ: {set(recorded) ^ names}"
        assert recorded[f"{dist_info}/RECORD"][1:] == ["", ""]
        for name in names - {f"{dist_info}/RECORD"}:
            data = archive.read(name)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert recorded[name][1:] == [f"sha256={digest}", str(len(data))], f"RECORD is wrong about {name}"

        for packaged, built_path in EXECUTABLES.items():
            info = archive.getinfo(f"psych_runtime/{packaged}")
            assert stat.S_IMODE(info.external_attr >> 16) == 0o755, f"{packaged} is not 0755 in the wheel"
            assert hashlib.sha256(archive.read(info)).hexdigest() == sha256(BUILD / built_path)
        metadata = archive.read(f"{dist_info}/METADATA").decode("utf-8")
        assert "Name: psych-runtime" in metadata.splitlines()
        assert "Root-Is-Purelib: false" in archive.read(f"{dist_info}/WHEEL").decode("utf-8").splitlines()


def test_sdist_says_it_needs_the_checkout(scratch):
    # A source distribution holds the Python half only; a wheel built from it has to say why it
    # cannot be, not fail somewhere in CMake.
    missing = build_frontend_missing(scratch)
    if missing:
        reason = f"python3-build is not installed ({missing})"
        pytest.skip(reason)
    out = scratch / "dist"
    built = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(out),
                            str(REPO / "python")], cwd=scratch, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    (sdist,) = out.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        # The data filter where this Python has it (3.11.4 on); the archive is our own either way.
        options = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        archive.extractall(scratch / "unpacked", **options)
    (unpacked,) = (scratch / "unpacked").iterdir()
    assert (unpacked / "PKG-INFO").is_file() and (unpacked / "psych_runtime" / "_paths.py").is_file()

    wheel = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-index", "--no-deps",
                            "--disable-pip-version-check", "-w", str(scratch / "wheels"), str(unpacked)],
                           cwd=scratch, capture_output=True, text=True, timeout=300)
    assert wheel.returncode != 0
    assert "psych source checkout" in wheel.stdout + wheel.stderr, wheel.stdout + wheel.stderr
    assert not list((scratch / "wheels").glob("*.whl"))
