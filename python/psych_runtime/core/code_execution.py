"""The runtime's built-in tools as a program sees them.

Three are callable from a program: list_tools and get_tool_info (bounded, read-only, and the only
way to learn a deferred server's argument shapes) and read_tool_output (for handles this program's
own calls produced). Every other built-in is refused with the kind excluded_builtin, and the
message is its sentence below. The compiled host holds the same table (C++ psych/builtins.hpp); it
is repeated here so that a deployment can show it without loading the compiled module.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Optional

RUN_CODE_TOOL = "run_code"
"""The reserved tool name: no Spec may claim it; code execution is turned on with code_execution."""

CALLABLE_BUILTINS: frozenset[str] = frozenset({"list_tools", "get_tool_info", "read_tool_output"})

EXCLUDED_BUILTINS: Mapping[str, str] = MappingProxyType({
    "ask_question": "ask_question pauses the Run until a person answers, and nothing can resume into a "
                    "subprocess that is waiting.",
    "delegate": "delegate starts a child Run, which would outlive this execution.",
    "spawn_subagent": "spawn_subagent starts a child Run, which would outlive this execution.",
    "check_subagent": "check_subagent addresses a child Run, and child Runs outlive any one execution.",
    "message_subagent": "message_subagent addresses a child Run, and child Runs outlive any one execution.",
    "remember": "remember changes the model's own memory, which is not the program's data.",
    "forget": "forget changes the model's own memory, which is not the program's data.",
    "update_tasks": "update_tasks changes the model's own task list, which is not the program's data.",
    "load_skill": "load_skill changes the model's own context, not the program's.",
    "show_component": "show_component speaks to the person in the conversation, whom a program cannot address.",
    RUN_CODE_TOOL: "run_code cannot be called from a program: one program does not start another.",
})
"""Each refused built-in and why, one sentence each."""


def exclusion_reason(name: str) -> Optional[str]:
    """Why a program may not call built-in `name`; None when it may, or when it is no built-in."""
    return EXCLUDED_BUILTINS.get(name)
