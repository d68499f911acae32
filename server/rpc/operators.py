"""Who may call the admin service, and the audit of every call: the gateway's check of the
operator (``server.rpc.gateway.CallCheck``), made before a call is routed.

Who may call: the holder of ``--admin-token-file``'s token (``authorization: Bearer``,
compared in constant time) or of a client certificate whose common name or a subject
alternative name is in ``--admin-subjects`` (mutual TLS). A call another node relays carries
the operator's token as it came, and every node checks it. Only without a token (mutual TLS
alone) does a relayed call about one table, or a relayed ListTables, pass on the cluster
key's word and the operator's name it carries (``x-copas-admin-by``): never Drain, Undrain or
ServerStatus, which are never relayed. Nothing else, a player token least of all. Every
call is audited: one ``admin_call`` log line with who, what, and how it ended, and
``copas_admin_actions_total``.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import grpc
import structlog

from server.errors import ServiceError
from server.metadata import ADMIN_BY
from server.observability import Metrics
from server.rpc import inputs
from server.rpc.peers import PeerTrust

log = structlog.get_logger("copas.admin")

Context = grpc.aio.ServicerContext[Any, Any]
REASON_MAX = 200  # an operator's reason for an action, at most
# The methods about tables a node relays to another (ListTables: asked of every node).
RELAYED_METHODS = frozenset({"ListTables", "GetTable", "CloseTable", "RemovePlayer"})


class AdminAuth:
    def __init__(self, token: str, subjects: frozenset[str], trust: PeerTrust) -> None:
        self._token = token.encode()
        self._subjects = subjects
        self._trust = trust

    @property
    def is_enabled(self) -> bool:
        return bool(self._token or self._subjects)

    def who(self, method: str, context: Context) -> str:
        """Who is calling, for the audit line.

        :raises ServiceError: ADMIN_DISABLED, ADMIN_CREDENTIAL_REQUIRED or ADMIN_DENIED.
        """
        if not self.is_enabled:
            raise ServiceError.denied(
                "the admin service is off on this server: start it with --admin-token-file "
                "or --admin-subjects", "ADMIN_DISABLED")
        metadata = context.invocation_metadata() or ()
        presented = [v for k, v in metadata if k == "authorization"]
        if not presented and not self._token and method in RELAYED_METHODS \
                and self._trust.is_relayed(metadata):
            by = next((v for k, v in metadata if k == ADMIN_BY and isinstance(v, str)), "")
            if by:
                return f"{by[:80]} (relayed)"
        if self._subjects:
            peer = context.auth_context()  # empty without TLS
            names = [*peer.get("x509_common_name", []),
                     *peer.get("x509_subject_alternative_name", [])]
            for name in names:
                text = name.decode(errors="replace")
                if text in self._subjects:
                    return f"certificate {text}"
        if not presented:
            raise ServiceError.unauthenticated(
                "the admin service needs an operator credential: send 'authorization: Bearer "
                "<admin token>' (or an operator's client certificate)",
                "ADMIN_CREDENTIAL_REQUIRED")
        value = presented[0]
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        scheme, _, secret = text.partition(" ")
        given = secret.strip().encode()
        if scheme.lower() != "bearer" or not given:
            raise ServiceError.unauthenticated(
                "authorization metadata must be 'Bearer <admin token>'",
                "ADMIN_CREDENTIAL_REQUIRED")
        # Constant time over the token's length: compare_digest looks at every byte.
        if not self._token or not hmac.compare_digest(given, self._token):
            raise ServiceError.denied("that is not an operator's credential", "ADMIN_DENIED")
        return "token " + hashlib.sha256(self._token).hexdigest()[:8]


class AdminAudit:
    """The gateway's check of every admin call (the operator's credential) and its audit
    line (with the caller's address) and count."""

    def __init__(self, auth: AdminAuth, trust: PeerTrust, metrics: Metrics) -> None:
        self._auth = auth
        self._trust = trust
        self._metrics = metrics

    def check(self, method: str, context: Context) -> str:
        return self._auth.who(method, context)

    def ended(self, method: str, request: Any, who: str, context: Context, code: str,
              error: ServiceError | None) -> None:
        what = _audited(request)
        # Whence: the caller's address, read as the quotas read it (a browser's through the
        # web port's relay, a client's through a trusted proxy).
        peer = self._trust.client_of(context.peer(), context.invocation_metadata() or ())
        if error is None and code == "OK":
            self._metrics.admin_actions.labels(method, "ok").inc()
            log.info("admin_call", method=method, who=who, peer=peer, outcome="ok", **what)
            return
        outcome = error.reason if error is not None else code
        self._metrics.admin_actions.labels(method, outcome).inc()
        log.warning("admin_call", method=method, who=who or "(refused)", peer=peer,
                    outcome=outcome, detail=error.message if error is not None else "", **what)


_AUDITED_IDS = ("championship_id", "account_id", "player", "player_a", "player_b")
_AUDITED_NUMBERS = ("round_number", "table_number", "is_paused")


def _audited(request: Any) -> dict[str, Any]:
    """What an audit line says of the request: its table, seat, championship, players, round
    and reason, when it has them (a corrected result's totals too)."""
    fields = request.DESCRIPTOR.fields_by_name if request is not None else {}
    what: dict[str, Any] = {}
    if "table_id" in fields:
        what["table_id"] = request.table_id[:inputs.ID_MAX]
    if "seat" in fields:
        what["seat"] = request.seat
    for name in _AUDITED_IDS:
        if name in fields and getattr(request, name):
            what[name] = getattr(request, name)[:inputs.ID_MAX]
    for name in _AUDITED_NUMBERS:
        if name in fields:
            what[name] = getattr(request, name)
    if "totals" in fields and request.totals:
        what["totals"] = list(request.totals)[:5]
        if request.set_absences:
            what["leaver_seats"] = list(request.leaver_seats)[:5]
            what["no_show_seats"] = list(request.no_show_seats)[:5]
    if "reason" in fields:
        what["reason"] = request.reason[:REASON_MAX]
    return what


def read_admin_token(path: str) -> str:
    """The first line of ``--admin-token-file`` (at least 16 characters)."""
    if not path:
        return ""
    with open(path, encoding="utf-8") as file:
        token = file.readline().strip()
    if len(token) < 16:
        raise ValueError(f"{path}: the admin token must be at least 16 characters")
    return token


def admin_subjects(text: str) -> frozenset[str]:
    return frozenset(s.strip() for s in text.split(",") if s.strip())
