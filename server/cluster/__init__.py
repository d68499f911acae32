"""A node among others sharing one PostgreSQL: its lease and takeovers (``ownership``), what
its tables share through the database (``shared_ownership``), where each call goes (``routing``,
``destination``), relaying calls to a table's owner (``forwarding``; spectators' streams of
one table share one relay, ``shared_watch``), and every node's lobby (``lobby``). Imports
downward only: tables/ and store/, never rpc/."""
