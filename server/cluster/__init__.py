"""A node among others sharing one PostgreSQL: its lease and takeovers (``ownership``), what
its tables share through the database (``directory``), where each call goes (``routing``),
relaying calls to a table's owner (``forwarding``), and every node's lobby (``lobby``).
Imports downward only: tables/ and store/, never rpc/."""
