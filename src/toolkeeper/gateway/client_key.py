"""An upstream OAuth client's private key (``private_key_file``): read once per connection, and
only from where no tool reaches it.

Whoever holds the key is the client: a tool that read it could mint tokens for the upstream
outside every rule of the gateway. So the file must sit in a toolkeeper state folder (the state
dir: the file tools refuse every state folder, and a sandboxed upstream never sees one), be a
regular file reached without a symlink at its last step, owned by the user toolkeeper runs as
and readable by that user only. Anything else is refused in one line naming what to change.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..builtins.state_dirs import STATE_MARKER, enclosing_state_dir

__all__ = ["ClientKeyRefused", "read_client_key"]

_CURVES = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
_FAMILY = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "Ed25519"}


class ClientKeyRefused(Exception):
    """The private key cannot be used; the message is the one line for the operator."""


def read_client_key(name: str, path: Path, algorithm: str | None) -> tuple[str, str]:
    """The PEM text of upstream ``name``'s key at ``path`` and the algorithm that signs with
    it (``algorithm``, else the key's own).

    Raises:
        ClientKeyRefused: the file is missing, out of a state folder, open to others, or not
            an unencrypted private key of a kind that signs JWTs.
    """
    where = f"MCP server '{name}': oauth private_key_file {path}"
    if enclosing_state_dir(Path(os.path.realpath(path.parent))) is None:
        raise ClientKeyRefused(
            f"{where} is not in a toolkeeper state folder, where a tool could read it; move it "
            f"into the state dir (or a folder holding a {STATE_MARKER} file) with chmod 600")
    pem = _owner_only(where, path)
    return pem, _algorithm(where, pem, algorithm)


def _owner_only(where: str, path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise ClientKeyRefused(f"{where} cannot be opened ({exc.strerror}); give the path of "
                               "a regular file (not a symlink)") from exc
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ClientKeyRefused(f"{where} is not a regular file")
        if info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise ClientKeyRefused(
                f"{where} is open to others (mode {stat.S_IMODE(info.st_mode):o}, owner uid "
                f"{info.st_uid}); make it owned by uid {os.geteuid()} and chmod 600 it")
        return handle.read(1 << 16).decode("ascii", "replace")


def _algorithm(where: str, pem: str, given: str | None) -> str:
    """``given`` when it fits the key's kind, else the key's own algorithm."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise ClientKeyRefused(f"{where} is not an unencrypted PEM private key ({exc})") from exc
    if isinstance(key, rsa.RSAPrivateKey):
        kind, own = "RSA", "RS256"
    elif isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name in _CURVES:
        kind, own = "EC", _CURVES[key.curve.name]
    elif isinstance(key, ed25519.Ed25519PrivateKey):
        kind, own = "Ed25519", "EdDSA"
    else:
        raise ClientKeyRefused(f"{where} is a {type(key).__name__}, which signs no JWT here; "
                               "use an RSA, EC (P-256, P-384, P-521) or Ed25519 key")
    if given is None:
        return own
    if _FAMILY[given[:2]] != kind or (kind == "EC" and given != own):
        raise ClientKeyRefused(f"{where} is an {kind} key, which cannot sign {given}; set "
                               f"signing_algorithm = \"{own}\" or leave it out")
    return given
