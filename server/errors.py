"""Service errors: the one mapping from a refusal to its gRPC status code (a game's own errors
are mapped by its module, ``server/games/<name>``).

Every reason is a value of the contract's ``copas.v1.ErrorReason`` enum: a ``ServiceError``
with any other reason cannot be made (``ValueError``), so the server never sends a reason
the contract does not document.
"""

from __future__ import annotations

import grpc
from copas.v1 import errors_pb2
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

ERROR_DOMAIN = "copas.v1.CopasService"
QUOTE_MAX = 24
OWNER_INFO_KEY = "owner"  # TABLE_MOVED's ErrorInfo metadata: the table's owner, host:port
REASONS = frozenset(errors_pb2.ErrorReason.keys()) - {"ERROR_REASON_UNSPECIFIED"}


def quote(value: str) -> str:
    """A client's string for a message or a log: at most a short prefix, escaped."""
    if len(value) <= QUOTE_MAX:
        return repr(value)
    return repr(value[:QUOTE_MAX]) + f"… ({len(value)} characters)"


class ServiceError(Exception):
    """An error with its gRPC status code, a reason from ``copas.v1.ErrorReason`` and a
    readable message."""

    def __init__(self, code: grpc.StatusCode, reason: str, message: str,
                 details: tuple[Message, ...] = (), penalty: float = 0.0,
                 info: dict[str, str] | None = None) -> None:
        if reason not in REASONS:
            raise ValueError(f"{reason!r} is not a copas.v1.ErrorReason")
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.penalty = penalty  # seconds to wait before answering (over a quota)
        self.is_quota = False  # over a per-client quota (counted, not logged)
        self.info = dict(info or {})  # the ErrorInfo's metadata (e.g. TABLE_MOVED's owner)

    @classmethod
    def invalid(cls, message: str, reason: str) -> ServiceError:
        return cls(grpc.StatusCode.INVALID_ARGUMENT, reason, message)

    @classmethod
    def precondition(cls, message: str, reason: str) -> ServiceError:
        return cls(grpc.StatusCode.FAILED_PRECONDITION, reason, message)

    @classmethod
    def already_exists(cls, message: str, reason: str) -> ServiceError:
        return cls(grpc.StatusCode.ALREADY_EXISTS, reason, message)

    @classmethod
    def not_found(cls, message: str, reason: str = "TABLE_NOT_FOUND") -> ServiceError:
        return cls(grpc.StatusCode.NOT_FOUND, reason, message)

    @classmethod
    def unauthenticated(cls, message: str, reason: str = "BAD_TOKEN") -> ServiceError:
        return cls(grpc.StatusCode.UNAUTHENTICATED, reason, message)

    @classmethod
    def denied(cls, message: str, reason: str = "WRONG_TABLE") -> ServiceError:
        return cls(grpc.StatusCode.PERMISSION_DENIED, reason, message)

    @classmethod
    def exhausted(cls, message: str, reason: str) -> ServiceError:
        return cls(grpc.StatusCode.RESOURCE_EXHAUSTED, reason, message)

    @classmethod
    def unavailable(cls, message: str, reason: str = "SHUTTING_DOWN") -> ServiceError:
        return cls(grpc.StatusCode.UNAVAILABLE, reason, message)

    @classmethod
    def over_quota(cls, message: str, reason: str, subject: str, retry_after: float,
                   penalty: float = 0.0) -> ServiceError:
        """RESOURCE_EXHAUSTED with a QuotaFailure naming what ran out and a RetryInfo; the
        answer comes after ``penalty`` seconds (0: at once; the retry delay counts from the
        answer)."""
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(max(retry_after, 0.001) * 1e9))
        error = cls(grpc.StatusCode.RESOURCE_EXHAUSTED, reason, message, (
            error_details_pb2.QuotaFailure(violations=[error_details_pb2.QuotaFailure.Violation(
                subject=subject, description=message)]),
            error_details_pb2.RetryInfo(retry_delay=delay)), penalty)
        error.is_quota = True
        return error

    @classmethod
    def storage_failed(cls) -> ServiceError:
        """The store failed (fail-stop): nothing more is accepted until the restart."""
        return cls.unavailable(
            "the server's store failed; it is restarting from its log, retry shortly",
            "STORAGE_FAILED")

    @classmethod
    def table_moved(cls, why: str, owner: str = "") -> ServiceError:
        """The table is (or may be) served by another node of the cluster now; ``why`` says
        what happened, in a few words; ``owner``, when known, is the public address of the
        node that owns it now (the ErrorInfo's ``metadata["owner"]``, OWNER_INFO_KEY)."""
        if not owner:
            return cls.unavailable(f"{why}: retry, through any node", "TABLE_MOVED")
        return cls(grpc.StatusCode.UNAVAILABLE, "TABLE_MOVED",
                   f"{why}: retry at {owner}, or through any node",
                   info={OWNER_INFO_KEY: owner})

    def to_status_pb(self) -> status_pb2.Status:
        """The error as a google.rpc.Status: code, message, ErrorInfo and the details."""
        packed = []
        for detail in (error_details_pb2.ErrorInfo(reason=self.reason, domain=ERROR_DOMAIN,
                                                   metadata=self.info),
                       *self.details):
            any_detail = any_pb2.Any()
            any_detail.Pack(detail)
            packed.append(any_detail)
        return status_pb2.Status(code=self.code.value[0], message=self.message, details=packed)

    def to_status(self) -> grpc.Status:
        """The error as the status a call ends with (its details in the trailer)."""
        return rpc_status.to_status(self.to_status_pb())
