"""What the tests share (test modules never import each other): games rigged and played
through the engine (``games``), servers started in this process or as a process of their own
(``servers``), calls and streams against them (``calls``), HTTP requests to a web port from
any loopback address (``web``), a client in a terminal (``terminal``)."""
