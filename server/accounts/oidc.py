"""Bring your own identity: an OIDC ID token from an issuer this server trusts, verified with
PyJWT (signature against the issuer's JWKS, issuer, audience, expiry, not-before), mapped to
one account by issuer and ``sub``.

An issuer is configured as ``ISSUER=AUDIENCE=JWKS`` (``--oidc-issuer``, repeatable); JWKS is a
file path (read at start) or an https URL (fetched and cached by PyJWT's ``PyJWKClient``, off the
event loop). Only asymmetric algorithms are accepted: a token signed with a shared secret, or
with ``none``, never verifies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # PyJWT (and cryptography) are imported at the first token: start-up
    import jwt

from server.errors import ServiceError

ID_TOKEN_MAX = 16 * 1024  # bytes; real ID tokens are 1-2 KB
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA")
LEEWAY_SECONDS = 30.0  # clock skew between the issuer and this server


@dataclass(frozen=True, slots=True)
class OidcIssuer:
    """One trusted issuer."""

    issuer: str
    """The ``iss`` its tokens carry, exactly."""
    audience: str
    """The ``aud`` a token for this server carries (the frontend's client id)."""
    jwks: str
    """Where its keys are: a JWKS file, or an https URL."""

    @classmethod
    def parse(cls, text: str) -> OidcIssuer:
        """``ISSUER=AUDIENCE=JWKS`` (the issuer may not hold '=').

        :raises ValueError: not of that form.
        """
        issuer, sep, rest = text.partition("=")
        audience, sep2, jwks = rest.partition("=")
        if not (sep and sep2 and issuer and audience and jwks):
            raise ValueError(f"--oidc-issuer wants ISSUER=AUDIENCE=JWKS, not {text!r}")
        return cls(issuer, audience, jwks)


@dataclass(frozen=True, slots=True)
class VerifiedIdentity:
    """Who an ID token says signed in."""

    issuer: str
    """The token's ``iss``."""
    subject: str
    """The token's ``sub``: the person at that issuer."""
    name: str
    """The token's ``name`` or ``preferred_username`` (may be empty)."""

    @property
    def key(self) -> str:
        """What the account's identity is stored as."""
        return f"{self.issuer}\n{self.subject}"


def _invalid(why: str) -> ServiceError:
    return ServiceError.unauthenticated(f"the ID token {why}", "INVALID_ID_TOKEN")


class _Keys:
    """One issuer's signing keys, from a file (read once) or a URL (PyJWKClient's cache)."""

    def __init__(self, source: str) -> None:
        import jwt

        self._client: jwt.PyJWKClient | None = None
        self._set: jwt.PyJWKSet | None = None
        if source.startswith("https://"):
            self._client = jwt.PyJWKClient(source, cache_keys=True, lifespan=600, timeout=5)
        else:
            self._set = jwt.PyJWKSet.from_dict(json.loads(Path(source).read_text()))

    def key_for(self, token: str, kid: str | None) -> jwt.PyJWK:
        import jwt

        if self._client is not None:
            try:
                return self._client.get_signing_key_from_jwt(token)
            except jwt.PyJWKClientError as exc:
                raise _invalid("names a key its issuer does not publish") from exc
        assert self._set is not None
        keys = [k for k in self._set.keys if kid is None or k.key_id == kid]
        if not keys:
            raise _invalid("names a key its issuer does not publish")
        return keys[0]


class OidcVerifier:
    """Verifies ID tokens of the configured issuers (blocking: call it off the event loop
    when an issuer's keys come from a URL)."""

    def __init__(self, issuers: list[OidcIssuer]) -> None:
        self._issuers = {i.issuer: (i, _Keys(i.jwks)) for i in issuers}

    @property
    def is_configured(self) -> bool:
        return bool(self._issuers)

    def verify(self, token: str) -> VerifiedIdentity:
        """:raises ServiceError: INVALID_ID_TOKEN, UNKNOWN_ISSUER."""
        if len(token) > ID_TOKEN_MAX:
            raise _invalid(f"is over {ID_TOKEN_MAX} bytes")
        import jwt

        try:
            header = jwt.get_unverified_header(token)
            unverified: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise _invalid("is not a JWT") from None
        issuer = unverified.get("iss")
        if not isinstance(issuer, str) or issuer not in self._issuers:
            raise ServiceError.unauthenticated(
                "the ID token's issuer is not one this server trusts", "UNKNOWN_ISSUER")
        config, keys = self._issuers[issuer]
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise _invalid("is not signed with an asymmetric algorithm this server accepts")
        kid = header.get("kid")
        key = keys.key_for(token, kid if isinstance(kid, str) else None)
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key, algorithms=[str(algorithm)], audience=config.audience,
                issuer=config.issuer, leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]})
        except jwt.ExpiredSignatureError:
            raise _invalid("expired") from None
        except jwt.ImmatureSignatureError:
            raise _invalid("is not valid yet") from None
        except jwt.InvalidAudienceError:
            raise _invalid("is for another audience") from None
        except jwt.PyJWTError:
            raise _invalid("does not verify") from None
        subject = claims["sub"]
        if not isinstance(subject, str) or not 1 <= len(subject) <= 255:
            raise _invalid("has no usable subject")
        name = claims.get("name") or claims.get("preferred_username") or ""
        return VerifiedIdentity(issuer, subject, name if isinstance(name, str) else "")
