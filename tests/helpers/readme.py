"""The README's grpcurl walk-throughs, read for the tests that replay them: a block's lines, one
grpcurl command line as (service, method, request JSON, metadata), the shell's variables
expanded, and a field found in an answer (what the shell extracts with sed)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent


def walk_through(mark: str) -> list[str]:
    """The lines of the README's shell block after ``mark``."""
    text = (ROOT / "README.md").read_text()
    block = text.split(mark, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def grpcurl_call(words: list[str]) -> tuple[str, str, dict[str, Any], list[tuple[str, str]]]:
    """(service, method, request JSON, metadata) of one grpcurl command line."""
    payload: dict[str, Any] = {}
    metadata = []
    service = method = ""
    i = 0
    while i < len(words):
        word = words[i]
        if word == "-d":
            payload = json.loads(words[i + 1])
            i += 1
        elif word == "-H":
            key, _, value = words[i + 1].partition(": ")
            metadata.append((key.lower(), value))
            i += 1
        elif word.startswith(("copas.v1.CopasService/", "copas.v1.AccountService/")):
            service, method = word.removeprefix("copas.v1.").split("/")
        i += 1
    return service, method, payload, metadata


def expand(line: str, env: dict[str, str]) -> str:
    return re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), m.group(0)), line)


def find(data: Any, field: str) -> str:
    if isinstance(data, dict):
        for key, value in data.items():
            if key == field:
                return str(value)
            found = find(value, field)
            if found:
                return found
    return ""
