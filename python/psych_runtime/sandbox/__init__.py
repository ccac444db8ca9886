"""Sandboxes: the port (port.Sandbox), the backends behind it (local, container, remote), and the
profiles a deployment wires them under."""
from .port import CompiledSandbox, Sandbox

__all__ = ["CompiledSandbox", "Sandbox"]
