"""Where the executables psych_runtime ships are: inside the installed package itself.

The wheel (python/_psych_build/backend.py) puts the launcher, psych and psych-remote in the
package's directory, laid out as an installed prefix (_bin/psych, libexec/psych/...), because the
executables find each other by paths relative to themselves. Every path here is computed from this
file's own location, never from the build tree or from where the package was installed, so a
virtualenv that is moved or copied elsewhere still runs its own copies.
"""

from __future__ import annotations

import os
from pathlib import Path

# Resolved: a symlinked site-packages or virtualenv still leads to the real files.
_PACKAGE_DIR = Path(__file__).resolve().parent

_REINSTALL = (
    "psych_runtime was installed without its launcher (or the installation was damaged); "
    "reinstall with `pip install ./python` from a psych checkout"
)


def package_dir() -> Path:
    """The installed psych_runtime package's directory."""
    return _PACKAGE_DIR


def _runnable(path: Path, what: str) -> str:
    # Checked here rather than left to the C++ side, so the failure names the file and the remedy
    # instead of a launch that fails somewhere inside the sandbox's setup.
    if path.is_file() and os.access(path, os.X_OK):
        return str(path)
    state = "is not executable" if path.exists() else "is missing"
    raise FileNotFoundError(f"{what} {path} {state}: {_REINSTALL}")


def launcher_path() -> str:
    """The launcher to run programs with: $PSYCH_LAUNCHER if set, else the package's own.

    $PSYCH_LAUNCHER comes first, as it does for the C++ library and the CLI, so one variable
    points every face of psych at another launcher (a development build, a differently
    confined copy). An empty value counts as unset, as it does there.
    """
    chosen = os.environ.get("PSYCH_LAUNCHER")
    if chosen:
        path = Path(chosen)
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        # Not the installation's fault: the remedy is the variable, not a reinstall.
        raise FileNotFoundError(
            f"PSYCH_LAUNCHER names {chosen}, which is missing or not executable; point it at a "
            "psych launcher, or unset it to use the one installed with psych_runtime"
        )
    return _runnable(_PACKAGE_DIR / "libexec" / "psych" / "psych-launch-linux", "the psych launcher")


def psych_executable() -> str:
    """The psych command line installed with the package (run, describe, serve, mcp)."""
    return _runnable(_PACKAGE_DIR / "_bin" / "psych", "the psych command line")


def psych_remote_executable() -> str:
    """psych-remote, which psych runs for serve and --remote; beside the launcher, where psych
    looks for it."""
    return _runnable(_PACKAGE_DIR / "libexec" / "psych" / "psych-remote", "psych-remote")
