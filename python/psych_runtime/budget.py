"""Binding budgets (C++ budget.hpp): how much of the host's work a program's tool calls may spend,
per execution and per Run. The deployment owns the numbers, on the profile; a CodeExecutionPolicy
may narrow them per tenant; a Spec neither raises nor carries them."""
from __future__ import annotations

from dataclasses import dataclass

from ._fields import Struct

MIB = 1 << 20


@dataclass(frozen=True)
class BindingBudget(Struct):
    """The ceilings. Five things are metered — calls, transfer, produced, preserved, and the
    per-call ceilings on arguments and results — per execution and (max_run_*) per Run, so a model
    cannot buy a fresh allowance by writing a second program."""

    max_calls: int = 200
    max_total_bytes: int = 8 * MIB
    """Transfer: bytes that crossed into the sandbox (C++ max_transfer_bytes)."""
    max_produced_bytes: int = 64 * MIB
    """Bytes the host's tools made, whether the program received them or not."""
    max_preserved_bytes: int = 64 * MIB
    """Bytes still sitting in the log or the BlobStore afterwards."""
    max_argument_bytes: int = 256 << 10
    """Per call: the largest arguments one call may send."""
    max_result_bytes: int = 1 * MIB
    """Per call: the largest result one call may hand over whole."""
    max_run_calls: int = 1000
    max_run_transfer_bytes: int = 32 * MIB
    max_run_produced_bytes: int = 256 * MIB
    max_run_preserved_bytes: int = 256 * MIB


@dataclass(frozen=True)
class MeterReadings(Struct):
    """What has been spent of the cumulative meters."""

    calls: int = 0
    transfer: int = 0
    produced: int = 0
    preserved: int = 0
