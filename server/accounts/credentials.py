"""The secrets of sign-in: device secrets and session tokens (kept as SHA-256 digests, as player
tokens are) and passwords (argon2id hashes, argon2-cffi). Nothing here logs or returns a secret."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from server.errors import ServiceError
from server.tokens import hash_token

DEVICE_SECRET_MIN = 22  # token_urlsafe(16): 128 bits
DEVICE_SECRET_MAX = 128
# A random 22-character secret holds about 19 different characters; fewer than 8 happens to
# one in about 10^12 (a made-up "aaaa..." or "abab..." is refused).
DEVICE_SECRET_DISTINCT = 8
PASSWORD_MIN = 10
PASSWORD_MAX = 128
_URL_SAFE = re.compile(r"[A-Za-z0-9_-]+")
_USERNAME = re.compile(r"[A-Za-z0-9._-]{3,32}")

ACCESS_PREFIX = "ca_"  # an access token; player tokens have no prefix
REFRESH_PREFIX = "cr_"


def device_digest(secret: str) -> str:
    """The digest a device secret is known by.

    :raises ServiceError: WEAK_DEVICE_SECRET (too short, too long, not URL-safe).
    """
    if not DEVICE_SECRET_MIN <= len(secret) <= DEVICE_SECRET_MAX \
            or not _URL_SAFE.fullmatch(secret) or len(set(secret)) < DEVICE_SECRET_DISTINCT:
        raise ServiceError.invalid(
            f"a device secret is {DEVICE_SECRET_MIN}..{DEVICE_SECRET_MAX} URL-safe characters "
            f"made at random on the device (at least {DEVICE_SECRET_DISTINCT} different ones)",
            "WEAK_DEVICE_SECRET")
    return hash_token("device:" + secret)


def username_key(username: str) -> str:
    """A username as it is looked up (case-insensitive).

    :raises ServiceError: INVALID_USERNAME.
    """
    if len(username) > 32 or not _USERNAME.fullmatch(username):
        raise ServiceError.invalid("a username is 3..32 letters, digits, '.', '_' or '-'",
                                   "INVALID_USERNAME")
    return username.lower()


def check_password(password: str) -> None:
    """:raises ServiceError: WEAK_PASSWORD (too short or too long)."""
    if not PASSWORD_MIN <= len(password) <= PASSWORD_MAX:
        raise ServiceError.invalid(
            f"a password is {PASSWORD_MIN}..{PASSWORD_MAX} characters", "WEAK_PASSWORD")


@dataclass(frozen=True, slots=True)
class PasswordParameters:
    """argon2id's cost: OWASP's Password Storage Cheat Sheet's baseline (19 MiB, 2 passes, one
    lane), about 25 ms of one core here. RFC 9106's second option (64 MiB, 3 passes), used
    before, cost 160 ms: six times the CPU that a flood of sign-ins takes from the games, for
    a password that guards a game account. Hashes made with other parameters still verify
    (argon2 keeps them in the hash)."""

    time_cost: int = 2
    """Passes over the memory."""
    memory_kib: int = 19456
    """Memory per hash, in KiB (19 MiB)."""
    parallelism: int = 1
    """Lanes (one: a hash takes one core, the server's other calls keep the rest)."""


class Passwords:
    """argon2id hashes; an unknown name is verified against a dummy hash so the answer takes
    the same time whether or not the name exists."""

    def __init__(self, parameters: PasswordParameters = PasswordParameters()) -> None:
        self.parameters = parameters
        self._hasher = PasswordHasher(time_cost=parameters.time_cost,
                                      memory_cost=parameters.memory_kib,
                                      parallelism=parameters.parallelism)
        self._dummy: str | None = None  # made at the first unknown name: start-up stays quick

    def hash(self, password: str) -> str:
        return self._hasher.hash(password)

    def _dummy_hash(self) -> str:
        """A hash of these parameters that no password is known for; one hash's work once."""
        if self._dummy is None:
            self._dummy = self._hasher.hash(secrets.token_urlsafe(16))
        return self._dummy

    def verify(self, stored: str | None, password: str) -> bool:
        """Whether ``password`` matches ``stored`` (None: no such name; still one hash's work)."""
        try:
            is_match = self._hasher.verify(stored or self._dummy_hash(), password)
            return is_match and stored is not None
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False

    def needs_rehash(self, stored: str) -> bool:
        return self._hasher.check_needs_rehash(stored)


def new_access_token() -> str:
    return ACCESS_PREFIX + secrets.token_urlsafe(32)


def new_refresh_token() -> str:
    return REFRESH_PREFIX + secrets.token_urlsafe(32)


def is_access_token(token: str) -> bool:
    return token.startswith(ACCESS_PREFIX)
