"""What happens to a program's output and the files it leaves (C++ output.hpp, artifacts.hpp). A
program can print a gigabyte: none of it is held unbounded and none of it is poured into the model's
context."""
from __future__ import annotations

from dataclasses import dataclass

from ._fields import Struct
from .enums import ArtifactCollection, OutputPreservation

MIB = 1 << 20


@dataclass(frozen=True)
class OutputPolicy(Struct):
    preview_bytes: int = 4_000
    """Per stream: what the model sees."""
    max_bytes: int = 8 * MIB
    """Per stream: what a backend captures at all; the rest is counted, not kept."""
    preserve: OutputPreservation = OutputPreservation.WHEN_AVAILABLE


@dataclass(frozen=True)
class ArtifactPolicy(Struct):
    """Whether the files a program writes to its workspace come back, by workspace-relative path.
    Symlinks, junctions and other reparse points are never followed and never collected."""

    collection: ArtifactCollection = ArtifactCollection.NONE
    max_files: int = 100
    max_file_bytes: int = 8 * MIB
    max_total_bytes: int = 32 * MIB
    max_depth: int = 16
