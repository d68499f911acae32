"""Accounts: people who come back. An account is signed in by a device secret, a username and
password, or an OIDC ID token from a trusted issuer; each sign-in starts a session (a short-lived
access token and a refresh token that rotates); ratings follow the account from game to game.

This package knows nothing of gRPC or of tables: the edge (``server.rpc``) calls ``Accounts``,
which keeps its state behind the ``AccountStore`` port (``model``).
"""
