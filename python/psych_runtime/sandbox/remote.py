"""A sandbox service of your own, over a small HTTP protocol (docs/remote-protocol.md has the
whole of it; `psych serve` is the reference service). Programs run on the service; the program's
tool calls come back here and go through this host's own gateway, budget and run log, so the tools,
their credentials, the run log and the BlobStore never move to the service.

Routes (every request carries ``Authorization: Bearer <token>``):

- ``GET /v1/describe`` — the service's description (the same JSON as describe()), from its last
  periodic probe; ``?fresh=1`` runs a probe now, which is what describe() asks for.
- ``POST /v1/executions/{id}`` — an execution_request (version, program, filename, terms,
  bindings, tenant); the answer is a chunked ``application/x-ndjson`` stream that lasts as long as
  the program. The client mints the id, and an id is never sent twice (``409`` if it is).
- ``POST /v1/executions/{id}/results`` — NDJSON ``result`` frames: the client's answers to the
  program's calls.
- ``POST /v1/executions/{id}/cancel`` — ends the execution; its stream then carries ``done``.

The stream's frames, one JSON object per line with a ``type``: ``accepted`` (version, execution_id,
backend) first; ``call`` (id, tool, arguments) and ``cancel_call`` (id) as the program makes them;
``live_output`` (stream, offset, base64 data) while it runs, in version 2 only; ``output`` (stream,
index, base64 data, at most 48 KiB each) once it ended; ``done`` (the outcome: value, failure,
sizes, artifacts, grades, ...) last, exactly once; or ``error`` (code, message, refusal) instead of
``accepted`` when nothing ran (``terms_unmet``, ``cancelled``, ``shutting_down``) or after it.

Refuse before running, on both sides: the client reads the description first and does not send a
program to a service that already says it cannot meet the terms; a service asked for terms it
cannot meet answers with a single ``error`` frame before executing. Everything read is bounded as
bytes arrive (a frame, a stream, the number of lines and of empty lines).

Failures are deterministic, because arbitrary code must not be re-run by accident: a non-200, a
stream that ends before ``done`` or a malformed frame is a provider_error; the wall clock and a
caller's cancellation each post a cancel and report timeout or cancelled. Only describe() retries;
an execution never does.

Credentials come from a callback resolved fresh per request, never from the Spec, and never appear
in a result, a record, a URL or an exception. A credential is refused over plaintext http:// unless
the host is loopback or `allow_insecure_http=True` says the network in between is trusted.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

from .._fields import Struct, positive
from .._json import to_json_text
from ..errors import translate
from .port import CompiledSandbox

TokenResolver = Callable[[], Optional[str]]


@dataclass(frozen=True)
class RemoteSandboxOptions(Struct):
    """C++ remote_sandbox_options without the token, which travels as a callback beside it."""

    url: str
    ca_file: Optional[str] = None
    allow_insecure_http: bool = False
    connect_timeout_seconds: float = positive(10.0)


def _resolver(token: TokenResolver) -> TokenResolver:
    def resolve() -> Optional[str]:
        value = token()
        if value is None or isinstance(value, str):
            return value
        # The value itself is never named: it may be the credential in the wrong wrapper.
        raise TypeError(f"the token callback returned {type(value).__name__}, not str or None")

    return resolve


class RemoteSandbox(CompiledSandbox):
    """A sandbox whose executions run on the service at `url` ("https://host:port").

    `token` is a sync callable returning the bearer credential (or None for none), called afresh for
    each describe() and each execution. `ca_file` is the PEM the service's certificate must chain to
    (default: the system's trust store). `connect_timeout_seconds` bounds describe() as a whole and
    each connection's connect and TLS handshake. Nothing is sent until describe() or run()."""

    def __init__(
        self,
        url: str,
        *,
        token: Optional[TokenResolver] = None,
        ca_file: Optional[str] = None,
        allow_insecure_http: bool = False,
        connect_timeout_seconds: float = 10.0,
    ) -> None:
        from .. import _psych

        if token is not None and not callable(token):
            raise TypeError("RemoteSandbox: token must be a callable returning the credential, not the credential")
        options = RemoteSandboxOptions(url=url, ca_file=ca_file, allow_insecure_http=allow_insecure_http,
                                       connect_timeout_seconds=connect_timeout_seconds)
        try:
            compiled = _psych.remote_sandbox(to_json_text(options), None if token is None else _resolver(token))
        except _psych.Failure as failure:
            raise translate(failure) from None
        super().__init__(compiled, minimum_isolation=None, name="remote")
        self.url = url
