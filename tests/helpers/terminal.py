"""A reference client in a pseudo-terminal, as a person uses it: read what it shows, type
into it; and the ``copas`` command run to its end."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time

from tests.helpers.servers import ROOT

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", "PYTHONUNBUFFERED": "1"}


def copas(*args: str, module: str = "clients.cli", timeout: float = 120
          ) -> subprocess.CompletedProcess[str]:
    """``copas ARGS`` (``module``: clients.cli, or tools.cli with the engine's bots) to its
    end."""
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


class Terminal:
    """A program in a pseudo-terminal: read what it shows, type into it."""

    def __init__(self, *args: str) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child
            os.chdir(ROOT)
            os.execve(sys.executable, [sys.executable, "-m", "clients.cli", *args], ENV)
        self.screen = ""
        self.mark = 0

    def read_until(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        end = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            match = regex.search(self.screen, self.mark)
            if match:
                self.mark = match.end()
                return match
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} in:\n{self.screen[-3000:]}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536).decode(errors="replace")
                except OSError:
                    chunk = ""
                if not chunk:
                    raise AssertionError(f"program ended before {pattern!r}:\n"
                                         f"{self.screen[-3000:]}")
                self.screen += ANSI.sub("", chunk.replace("\r\n", "\n"))

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def exit_code(self, timeout: float = 30) -> int:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:
                if select.select([self.fd], [], [], 0.1)[0]:
                    self.screen += os.read(self.fd, 65536).decode(errors="replace")
            except OSError:
                time.sleep(0.05)
        raise AssertionError("program did not exit")


PROMPT = (r"(Choose 3 cards to pass[^\n]*: |Your turn[^\n]*legal: ([^.]*)\. Card[^\n]*: "
          r"|You shot the moon![^\n]*: |final standings)")
