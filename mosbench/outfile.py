"""A file the user named (a report, an export, a figure): written whole or not at all, and where it cannot
be, one line saying why.

A regular file, or one not there yet, is written beside its target under a hidden name and renamed onto
it, so a full disk or an interruption leaves the old file (or none), never half of a new one; folders that
go with it (a report's figures) are made beside it the same way and swapped in with it. A device or a
pipe (/dev/stdout, /dev/full, a FIFO) cannot be replaced: it is written directly, and what goes with it
is drawn into a temporary folder and removed. Whatever was made for a file that could not be written
(folders on the way to it included) is removed again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mosbench.errors import UserError

_MAX_LINKS = 40  # as the kernel follows them


def _replaced(path: Path) -> Path | None:
    """The regular file (or the name where none is yet) that a file written beside it is renamed onto,
    following the user's symbolic links; None for what must be written in place: a device, a pipe or a
    socket, and the descriptors /proc shows as links (/dev/stdout is /proc/self/fd/1, which names the
    file the shell opened: replacing that would leave the shell writing to a file no longer there)."""
    for _ in range(_MAX_LINKS):
        if Path(os.path.realpath(path.parent)).is_relative_to("/proc"):
            return None
        if not path.is_symlink():
            break
        link = Path(os.readlink(path))
        if link.is_absolute() and link.is_relative_to("/proc"):
            return None
        path = path.parent / link
    else:
        return None
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return path
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(21, os.strerror(21))
    return path if stat.S_ISREG(mode) else None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@dataclass
class Output:
    """A file the user named, checked (target()) before anything is computed for it."""

    path: Path  # as the user named it
    what: str  # what it holds, for the error: "the report"
    replaced: Path | None  # the file renamed onto; None: written in place
    made: list[Path] = field(default_factory=list)  # folders made on the way to it, outermost first
    _temporary: list[Path] = field(default_factory=list)  # files and folders to remove however it ends
    _folders: dict[Path, Path] = field(default_factory=dict)  # a staged folder → where it goes

    @property
    def in_place(self) -> bool:
        return self.replaced is None

    def folder(self, name: str) -> Path | None:
        """A folder for the files that go with this one, named `name` beside it: made under a hidden name
        and swapped in when the file is written. None for a file written in place, which has nothing
        beside it: what it would hold is drawn into a temporary folder (`scratch`) and removed."""
        if self.replaced is None:
            return None
        staged = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=self.replaced.parent))
        self._temporary.append(staged)
        os.chmod(staged, 0o777 & ~_umask())  # as mkdir would have made it, not mkdtemp's owner-only
        self._folders[staged] = self.replaced.parent / name
        return staged

    def scratch(self) -> Path:
        """A temporary folder, removed however the command ends."""
        made = Path(tempfile.mkdtemp(prefix="mosbench-"))
        self._temporary.append(made)
        return made

    def write_bytes(self, data: bytes) -> None:
        """The file's whole content: written in place, or beside it and renamed onto it (its staged
        folders with it)."""
        if self.replaced is None:
            with open(self.path, "wb") as f:
                f.write(data)
            return
        fd, name = tempfile.mkstemp(prefix=f".{self.replaced.name}.", dir=self.replaced.parent)
        written = Path(name)
        self._temporary.append(written)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # on disk before it takes the old one's name: a crash leaves one or the other
        try:
            keep = stat.S_IMODE(self.replaced.stat().st_mode)
        except FileNotFoundError:
            keep = 0o666 & ~_umask()  # as open() would have made it
        os.chmod(written, keep)
        self._swap_folders()
        os.replace(written, self.replaced)
        self._temporary.remove(written)

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode())

    def _swap_folders(self) -> None:
        for staged, final in self._folders.items():
            old = None
            if final.is_dir() and not final.is_symlink():
                old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old.", dir=final.parent))
                self._temporary.append(old)
                os.replace(final, old / final.name)
            try:
                os.replace(staged, final)
            except OSError:
                if old is not None:  # the last report's figures back where they were
                    os.replace(old / final.name, final)
                raise
            self._temporary.remove(staged)
        self._folders.clear()

    def discard(self) -> None:
        """Everything made for the file removed: its hidden copy, staged folders, folders on the way."""
        self.close()
        for folder in reversed(self.made):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only where still empty: never what someone else put there since

    def close(self) -> None:
        for made in reversed(self._temporary):
            if made.is_dir():
                shutil.rmtree(made, ignore_errors=True)
            else:
                made.unlink(missing_ok=True)
        self._temporary.clear()

    @contextlib.contextmanager
    def writing(self) -> Iterator[Output]:
        """The work that writes the file: on an OSError (a full disk, a device that refuses), everything
        made removed and one line said; what was temporary removed however it ends."""
        try:
            yield self
        except OSError as e:
            self.discard()
            raise UserError(f"cannot write {self.what} to {self.path}: {e.strerror or e}") from None
        except BaseException:
            self.discard()
            raise
        self.close()


@contextlib.contextmanager
def files_into(directory: Path, what: str) -> Iterator[Path]:
    """Files written into a folder the user named (`model scaling -o DIR`), each whole: drawn into a hidden
    folder inside it and moved in when all are there; on a failure, one line, and the hidden folder and
    the folders made on the way removed (what the folder held before is left as it was)."""
    made = [p for p in (directory, *directory.parents) if not p.exists()]
    staged = None
    try:
        for folder in reversed(made):
            folder.mkdir()
        staged = Path(tempfile.mkdtemp(prefix=".mosbench-", dir=directory))
        yield staged
        for drawn in sorted(staged.iterdir()):
            os.replace(drawn, directory / drawn.name)
    except OSError as e:
        raise UserError(f"cannot write {what} into {directory}: {e.strerror or e}") from None
    finally:
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()  # only a folder left empty: one that received the files stays


def target(path: Path, what: str) -> Output:
    """`path` checked before anything is computed for it: a folder refused, the folders on the way made
    (and removed again should it not be written) and a file written and removed beside it, or a device
    or pipe that can be written; one line saying why not."""
    try:
        replaced = _replaced(path)
    except OSError as e:
        raise UserError(f"cannot write {what} to {path}: {e.strerror or e}") from None
    out = Output(path, what, replaced)
    try:
        if replaced is None:
            if not os.access(path, os.W_OK):
                raise PermissionError(13, os.strerror(13))
            return out
        missing = [p for p in (replaced.parent, *replaced.parent.parents) if not p.exists()]
        for folder in reversed(missing):
            folder.mkdir()
            out.made.append(folder)
        with tempfile.NamedTemporaryFile(dir=replaced.parent, prefix=f".{replaced.name}."):
            pass
    except OSError as e:
        out.discard()
        raise UserError(f"cannot write {what} to {path}: {e.strerror or e}") from None
    return out
