"""Files written whole or not at all: reports, and the discovery cache that parallel workers share."""
from __future__ import annotations

import os
import tempfile


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: read once, in the main thread, before any worker exists (os.umask sets as it reads)
UMASK = _umask()


def atomic_write(path: str, text: str) -> None:
    """Write ``path`` whole or not at all, with the mode a plain ``open`` would give
    (the temp file is 0600: CI log servers could not publish the reports).

    The rename is atomic: readers never see a half-written file, and
    processes racing to write the same content leave one whole copy.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.chmod(tmp, 0o666 & ~UMASK)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_toml(path: str) -> dict:
    """A TOML file the harness reads (causes, known findings, samples) as a dict, or one
    line naming the file and what is wrong with it (:class:`harness.errors.InvalidScenario`)."""
    import tomllib

    from harness.errors import InvalidScenario
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidScenario(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise InvalidScenario(f"{path}: cannot read it: {exc.strerror}") from None
