"""How a Python test driver reports a case that cannot run here (docs/testing.md): as a skip,
never as a pass, summed up by scripts/test from $PSYCH_SKIP_LOG, and as a failure in CI as root,
where every mechanism is present."""
import os


class Skipped(Exception):
    """A case that cannot run here: reported as a skip, never as a pass."""


def ci_requires_every_case():
    """CI=true (or 1) as root: a host with every mechanism, where no case may skip."""
    return os.environ.get("CI") in ("true", "1") and os.geteuid() == 0


def log_skip(suite, name, reason):
    """One line in $PSYCH_SKIP_LOG, which scripts/test sums up across the suite."""
    path = os.environ.get("PSYCH_SKIP_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{suite}\t{name}\t{reason}\n")
