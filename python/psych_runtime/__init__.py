"""psych_runtime: run the program a model writes in a real sandbox, and hand back the result as data.

Process isolation is the floor: there is no in-process execution and no configuration that lowers
it. The deployment wires backends and their hard limits under logical names (SandboxProfile); the
agent asks, in its AgentSpec, for a named profile and terms no wider than that profile's.

The compiled half (psych_runtime._psych) is loaded only when a sandbox or a Runtime is made, so the
value types can be used, and tested, without it.
"""
from .budget import BindingBudget, MeterReadings
from .core.code_execution import EXCLUDED_BUILTINS
from .description import BackendInfo, Description, ProfileStatus, RunAsReport
from .enums import (
    ArtifactCollection,
    AttachmentLocation,
    Enforcement,
    FailureKind,
    IsolationLevel,
    NetworkAccess,
    OmissionReason,
    OutputPreservation,
    RefusalReason,
    RunAsMode,
    ToolKind,
    WorkspacePolicy,
)
from .errors import PsychError, PublishError, SandboxSetupError, ToolCallError
from .grant import CodeExecutionGrant, CodeExecutionPolicy
from .limits import CodeExecutionLimits, LimitCaps, SandboxLimits
from .output import ArtifactPolicy, OutputPolicy
from .results import (
    Artifact,
    EgressRefusal,
    EgressReport,
    GuaranteeGrades,
    OutputLine,
    OutputWindow,
    Refusal,
    ResultAttachment,
    RunCodeOutcome,
    SandboxFailure,
    SandboxResult,
)
from .live import OutputChunk
from .runtime import Attempt, Runtime, RunLog, UnknownCall
from .spec import AgentSpec, AgentVersion, CodeExecution, ModelRef
from .tools import A2aPeer, CodeTool, HttpTool, McpHttpServer, McpServer

__all__ = [
    "AgentSpec", "AgentVersion", "Artifact", "ArtifactCollection", "ArtifactPolicy", "AttachmentLocation", "Attempt",
    "BackendInfo", "BindingBudget", "CodeExecution", "CodeExecutionGrant", "CodeExecutionLimits",
    "CodeExecutionPolicy", "CodeTool", "Description", "EXCLUDED_BUILTINS", "EgressRefusal", "EgressReport",
    "Enforcement", "FailureKind",
    "A2aPeer", "GuaranteeGrades", "HttpTool", "IsolationLevel", "LimitCaps", "McpHttpServer", "McpServer", "MeterReadings",
    "ModelRef", "NetworkAccess", "OmissionReason", "OutputChunk", "OutputLine", "OutputPolicy", "OutputPreservation",
    "OutputWindow", "ProfileStatus", "PsychError", "PublishError", "Refusal", "RefusalReason", "ResultAttachment",
    "RunAsMode", "RunAsReport", "RunCodeOutcome", "RunLog", "Runtime", "SandboxFailure", "SandboxLimits",
    "SandboxResult", "SandboxSetupError", "ToolCallError", "ToolKind", "UnknownCall", "WorkspacePolicy",
]
