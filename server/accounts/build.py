"""The accounts of a server, from its configuration: their store (memory, SQLite beside the
tables in ``--data-dir``, or the cluster's PostgreSQL), the password hasher and its turns, the
trusted OIDC issuers, the attempt limits, the password checks' and the new accounts' per
address and per IPv6 network."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Protocol

from server.accounts.attempts import AccountCreations, AttemptRule, SignInAttempts
from server.accounts.credentials import PasswordParameters, Passwords
from server.accounts.hashing import PasswordWork
from server.accounts.model import AccountStore, MemoryAccountStore
from server.accounts.oidc import OidcIssuer, OidcVerifier
from server.accounts.service import Accounts
from server.config import Config
from server.store.base import StoreUnusable

ACCOUNTS_FILE = "accounts.sqlite3"


class ClosableStore(AccountStore, Protocol):
    def close(self) -> None: ...


class _Memory(MemoryAccountStore):
    def close(self) -> None:
        return None


def open_account_store(config: Config) -> ClosableStore:
    """:raises StoreUnusable: the accounts' database cannot be opened."""
    try:
        if config.database:
            from server.accounts.postgres import PgAccountStore

            return PgAccountStore(config.database)
        if config.data_dir == "memory":
            return _Memory()
        from server.accounts.sqlite import SqliteAccountStore

        return SqliteAccountStore(Path(config.data_dir) / ACCOUNTS_FILE)
    except Exception as exc:
        raise StoreUnusable(f"cannot open the accounts' store: {exc}") from None


def issuers(config: Config) -> list[OidcIssuer]:
    """:raises ValueError: --oidc-issuers is not a list of ISSUER=AUDIENCE=JWKS."""
    return [OidcIssuer.parse(part.strip()) for part in config.oidc_issuers.split(",")
            if part.strip()]


def build_accounts(config: Config, store: AccountStore) -> Accounts:
    """:raises ValueError: an issuer's flag or its JWKS file cannot be used."""
    passwords = Passwords(PasswordParameters(time_cost=config.password_time_cost,
                                             memory_kib=config.password_memory_kib))
    try:
        verifier = OidcVerifier(issuers(config))
    except Exception as exc:
        raise ValueError(f"--oidc-issuers: {exc}") from None
    factors = (config.ipv6_56_factor, config.ipv6_48_factor)
    per_minute = config.password_checks_per_address_per_minute
    checks = AttemptRule(max(int(config.password_checks_burst), 1), per_minute / 60) \
        if per_minute else None
    return Accounts(store, time.time, passwords=passwords, verifier=verifier,
                    attempts=SignInAttempts(time.monotonic),
                    access_ttl=config.access_token_seconds,
                    refresh_ttl=config.refresh_token_days * 86400.0,
                    guest_ttl=config.guest_days * 86400.0,
                    sessions_kept=max(config.sessions_per_account, 1),
                    is_one_network_rated=config.rate_one_network,
                    password_work=PasswordWork(
                        at_once=config.password_hashes_at_once
                        or max(1, (os.cpu_count() or 2) // 2),
                        per_address=config.password_checks_per_address,
                        rate=checks, factors=factors,
                        niceness=config.password_hash_niceness),
                    creations=AccountCreations(time.monotonic,
                                               config.accounts_per_address_per_hour,
                                               config.accounts_burst, factors=factors))
