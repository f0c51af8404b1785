"""--tokens FILE: who may triage. One `name:secret` a line; the name is recorded with each triage, the
secret is what a script sends (`Authorization: Bearer SECRET`) or a person types into the sign-in form."""

from __future__ import annotations

import hmac
import re
from pathlib import Path

from mosbench.errors import UserError

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")
# A secret a person could guess is no secret: 16 characters is 96 bits as `openssl rand -base64 12` makes them.
SHORTEST_SECRET = 16


class Tokens:
    """Names by secret, matched in constant time (a secret's prefix must not answer faster than a stranger's)."""

    def __init__(self, by_name: dict[str, str]) -> None:
        self._secrets = [(name, secret.encode()) for name, secret in by_name.items()]

    def __len__(self) -> int:
        return len(self._secrets)

    def name_of(self, secret: str) -> str | None:
        given = secret.encode()
        found = None
        for name, known in self._secrets:  # every one compared, whichever matches
            if hmac.compare_digest(given, known):
                found = name
        return found

    def has(self, name: str) -> bool:
        return any(n == name for n, _ in self._secrets)


def parse(text: str, where: str) -> dict[str, str]:
    """A tokens file's `name:secret` lines (blank lines and # comments aside): name -> secret."""
    out: dict[str, str] = {}
    secrets: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, colon, secret = line.partition(":")
        at = f"{where} line {number}"
        if not colon:
            raise UserError(f"{at}: give name:secret (one a line)")
        name, secret = name.strip(), secret.strip()
        if not NAME.fullmatch(name):
            raise UserError(f"{at}: the name {name!r} is not one a triage can be recorded under "
                            "(letters, digits and ._@+- , up to 64)")
        if len(secret) < SHORTEST_SECRET:
            raise UserError(f"{at}: {name}'s secret is shorter than {SHORTEST_SECRET} characters "
                            "(`openssl rand -base64 24` makes one)")
        if name in out:
            raise UserError(f"{at}: {name} is given twice")
        if secret in secrets:
            raise UserError(f"{at}: {name}'s secret is another name's too: a triage must say who made it")
        out[name] = secret
        secrets.add(secret)
    if not out:
        raise UserError(f"{where} names no one (name:secret, one a line): without a tokens file the server is "
                        "read-only")
    return out


def read(path: Path) -> dict[str, str]:
    """The tokens file, or one line saying why it will not do."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read the tokens file {path}: {getattr(e, 'strerror', None) or e}") from None
    return parse(text, str(path))
