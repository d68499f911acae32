"""The games this server plays, by name: each a package ``server/games/<name>/`` exporting
``MODULE`` (imported by nothing, so that the store and the configuration may read them)."""

GAMES = ("hearts", "bisca")
DEFAULT_GAME = GAMES[0]  # the game of a table, a record or a request that names none
