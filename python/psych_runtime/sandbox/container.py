"""The container backend: the same launcher, started inside a container by podman or docker, and
graded from what the child observes, like every other backend. It reaches ISOLATED.

Nothing is ever pulled: a missing image is a not-ready backend whose description names the command
that builds it. Prefer an image digest (name@sha256:...) where a deployment must be reproducible.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from .._fields import Struct, signed
from .._json import to_json_text
from ..errors import translate
from ..limits import LimitCaps, SandboxLimits
from .local import _installed_launcher
from .port import CompiledSandbox

DEFAULT_IMAGE = "localhost/psych-python:bookworm"


@dataclass(frozen=True)
class ContainerSandboxOptions(Struct):
    """C++ container_sandbox_options; a member left None keeps the C++ default."""

    runtime: Optional[str] = None
    image: str = DEFAULT_IMAGE
    container_python_bin: str = "/usr/bin/python3"
    limit_ceiling: Optional[LimitCaps] = None
    env_allowlist: Optional[tuple[str, ...]] = None
    run_as_uid: Optional[int] = signed(None)
    extra_run_args: tuple[str, ...] = ()
    launcher_path: Optional[str] = None


class ContainerSandbox(CompiledSandbox):
    """A container sandbox, probed when it is built (this blocks for the probe container).

    `runtime`: "podman" or "docker" (or a path to either); None tries podman, then docker.
    `image` defaults to the image psych's own build makes, localhost/psych-python:bookworm; the
    spec's python:3.12-slim is only an example — whatever you name, you pull or build it yourself,
    it is never pulled implicitly. `container_python_bin` is the interpreter inside the image.
    `default_limits` is the backend's ceiling. `run_as` is one fixed uid for every execution (None:
    a uid of its own per execution). `extra_run_args` are appended to `run`; only flags that name,
    label or narrow the container are accepted, since anything else could undo what psych set.
    """

    def __init__(
        self,
        runtime: Optional[str] = None,
        image: str = DEFAULT_IMAGE,
        container_python_bin: str = "/usr/bin/python3",
        default_limits: "SandboxLimits | LimitCaps | None" = None,
        env_allowlist: Optional[Sequence[str]] = None,
        run_as: Optional[int] = None,
        extra_run_args: Sequence[str] = (),
    ) -> None:
        from .. import _psych

        for name, value in (("env_allowlist", env_allowlist), ("extra_run_args", extra_run_args)):
            if isinstance(value, str):
                raise TypeError(f"ContainerSandbox: {name} must be a sequence of str, not one str")
        options = ContainerSandboxOptions(
            runtime=runtime, image=image, container_python_bin=container_python_bin,
            limit_ceiling=None if default_limits is None else LimitCaps.of(default_limits),
            env_allowlist=None if env_allowlist is None else tuple(env_allowlist),
            run_as_uid=run_as, extra_run_args=tuple(extra_run_args), launcher_path=_installed_launcher())
        try:
            compiled = _psych.container_sandbox(to_json_text(options))
        except _psych.Failure as failure:
            raise translate(failure) from None
        # No minimum of its own: run() asks for the level the offer claims (ISOLATED for a working
        # container), so a runtime that misreports is caught by the child's containment report.
        super().__init__(compiled, minimum_isolation=None, name="container")
        self.image = image
