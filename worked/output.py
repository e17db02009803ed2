"""Writing output safely: the one mechanism every command that writes uses.

* :func:`write_file` — one file (``worked new -o``, ``worked notebook -o``): written to a temporary
  file beside it and renamed over it, so the old file stays whole until the new one is complete.
* :class:`FolderSet` — a folder of files that belong together (``worked quiz``, ``worked sheet``,
  ``worked grade``): the new files are written into a staging folder beside it, then swapped in.

A folder written by ``worked`` holds a marker file, :data:`MARKER`, that lists every file worked wrote
there. Only those files are ever replaced or removed: any other file (a ``thesis.docx`` someone put
there) is left alone, and :meth:`FolderSet.commit` says which it left alone. A folder with files
worked did not write is only written into with ``force``.

When the folder holds only worked's files, the new set replaces the old one in one step
(``renameat2(RENAME_EXCHANGE)`` on Linux, two renames elsewhere): a kill at any moment leaves the old
set or the new one. When other files share the folder (``--force``), the old set is removed first and
the new files are moved in: a kill leaves part of the new set, never old files beside new ones.

Two runs into one folder: the second fails at once with a clear message (a lock file beside the
folder, held with ``flock``, removed at the end). Debris of a run that was killed (staging folders,
temporary files) is removed by the next run. Every ``OSError`` (a full disk, a read-only folder)
becomes one :class:`~worked.errors.WorkedError` naming the path, after the temporary files are removed.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import fnmatch
import os
import re
import shutil
from pathlib import Path

from .errors import WorkedError
from .i18n import Msg, joined

MARKER = ".worked"
LEGACY_MARKERS = (".worked-quiz",)     # written before the marker listed its files
_MARKER_HEAD = "# written by {kind}. worked replaces or removes only the files listed below, never others.\n"


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cannot_write(path, exc: OSError) -> WorkedError:
    """The one-line error for an OSError while writing *path*."""
    at = dict(path=path, reason=exc.strerror or str(exc))
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return WorkedError(Msg("{path}: cannot write: {reason}; free some space or write elsewhere with -o", **at))
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return WorkedError(Msg("{path}: cannot write: {reason}; write elsewhere with -o", **at))
    return WorkedError(Msg("{path}: cannot write: {reason}", **at))


# ---------------------------------------------------------------- one file

_FILE_DEBRIS = re.compile(r"^\.(?P<name>.+?)\.tmp-?(?P<pid>\d+)$")


def _remove_file_debris(path: Path) -> None:
    """Temporary files of earlier runs that were killed: ``.NAME.tmp-PID`` (and the older ``.NAME.tmpPID``)."""
    try:
        siblings = list(path.parent.iterdir())
    except OSError:
        return
    for p in siblings:
        m = _FILE_DEBRIS.match(p.name)
        if m and m["name"] == path.name and not _pid_alive(int(m["pid"])) and p.is_file():
            with contextlib.suppress(OSError):
                p.unlink()


def write_file(path, data: bytes | str, *, force: bool = True) -> Path:
    """Write *data* to *path* atomically. Without *force*, an existing *path* is an error."""
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    if path.is_dir():
        raise WorkedError(Msg("{path}: is a folder (expected a file name)", path=path))
    if path.exists() and not force:
        raise WorkedError(Msg("{path}: already exists (use --force to overwrite)", path=path))
    if not path.parent.is_dir():
        raise WorkedError(Msg("{path}: no such folder", path=path.parent))
    _remove_file_debris(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise cannot_write(path, exc) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


# ---------------------------------------------------------------- the marker

def read_marker(folder: Path) -> list[str] | None:
    """The files worked wrote in *folder* (relative paths), [] for an old marker that listed none,
    None when *folder* has no marker."""
    m = folder / MARKER
    if m.is_file():
        try:
            text = m.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return []
        return [ln for ln in text.splitlines() if ln and not ln.startswith("#") and not ln.startswith("written by")]
    if any((folder / name).is_file() for name in LEGACY_MARKERS):
        return []
    return None


def marker_text(kind: str, files) -> bytes:
    return (_MARKER_HEAD.format(kind=kind) + "".join(f"{f}\n" for f in sorted(files))).encode("utf-8")


def _files_under(folder: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        rel = os.path.relpath(dirpath, folder)
        for f in filenames:
            out.append(f if rel == "." else f"{rel}/{f}".replace(os.sep, "/"))
    return sorted(out)


# ---------------------------------------------------------------- swapping folders

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux renameat2); False where the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


class Busy(WorkedError):
    pass


class FolderSet:
    """Write a set of files into *folder* as one: ``write()`` them into a staging folder, then
    ``commit()`` (or ``abort()``). Use it as a context manager: an exception aborts.

    *kind* names the command (``worked quiz``) in the marker and in messages. *scope*: None replaces
    worked's whole set; a list of relative folder prefixes (``["variants/K3F9"]``) replaces only worked's
    files under them and keeps the rest of the set. *legacy*: glob patterns of the files this command
    writes: what an old marker (that listed nothing) stands for, and whose ``.NAME.*.tmp`` are debris. *ask_to_replace*: existing files of the same names need *force*
    (``worked grade``), and other files in the folder need none, since they are never touched.
    """

    def __init__(self, folder, *, kind: str, force: bool = False, scope=None, legacy=(), ask_to_replace=False,
                 hint: str = Msg("use --force or another -o")):
        folder = Path(folder)
        if folder.name in ("", ".", ".."):     # -o . : the folder by its name, beside its parent
            folder = Path(os.path.abspath(folder))
        self.folder = folder
        self.kind, self.force, self.scope, self.legacy = kind, force, scope, tuple(legacy)
        self.left_alone: list[str] = []
        self.replaced_foreign: list[str] = []
        self._lock_fd = None
        if folder.exists() and not folder.is_dir():
            raise WorkedError(Msg("{path}: exists and is not a folder", path=folder))
        parent = folder.parent
        self.tmp = parent / f".{folder.name}.tmp-{os.getpid()}"
        try:
            parent.mkdir(parents=True, exist_ok=True)
            self._lock()
            self._remove_debris()
            owned = read_marker(folder) if folder.is_dir() else None
            present = _files_under(folder) if folder.is_dir() else []
            self.present = present
            self.owned = self._owned(owned, present)
            foreign = [f for f in present if f not in self.owned and f != MARKER and f not in LEGACY_MARKERS
                       and not self._is_debris(f)]
            self.ask_to_replace = ask_to_replace
            if not ask_to_replace:
                if foreign and not force:
                    shown = ", ".join(foreign[:3])
                    at = dict(path=folder, kind=kind, files=shown, more=len(foreign) - 3, hint=hint)
                    raise WorkedError(Msg("{path}: folder holds files not written by `{kind}` ({files} and {more} more); "
                                          "{hint} (--force leaves them alone)", **at) if len(foreign) > 3 else
                                      Msg("{path}: folder holds files not written by `{kind}` ({files}); {hint} (--force "
                                          "leaves them alone)", **at))
            self.foreign = foreign
            self.tmp.mkdir()
        except OSError as exc:
            self._unlock()
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise cannot_write(folder, exc) from None
        except BaseException:
            self._unlock()
            raise
        self.written: list[str] = []

    # -- ownership
    def _owned(self, listed, present) -> set[str]:
        if listed is None:
            return set()
        if listed:
            return set(listed)
        # an old marker that listed nothing: the files of the names worked writes
        return {f for f in present if any(fnmatch.fnmatch(f, pat) for pat in self.legacy)}

    def _is_debris(self, rel: str) -> bool:
        """``.NAME.XXXX.tmp`` / ``.NAME.tmpPID`` beside a file NAME of ours, left by a killed run (of
        an earlier version, whose writers put them there). Another ``.something.tmp`` is not ours."""
        head, _, base = rel.rpartition("/")
        m = re.fullmatch(r"\.(.+?)\.(\w+\.tmp|tmp-?\d+)", base)
        if not m:
            return False
        name = f"{head}/{m[1]}" if head else m[1]
        return name in self.owned or any(fnmatch.fnmatch(name, pat) for pat in self.legacy)

    # -- the lock
    def _lock(self) -> None:
        path = self.folder.parent / f".{self.folder.name}.lock"
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                try:
                    pid = os.pread(fd, 32, 0).decode().strip()
                except (OSError, UnicodeDecodeError):
                    pid = ""
                os.close(fd)
                raise Busy(Msg("{path}: another worked run (pid {pid}) is writing this folder; wait for it to finish, or "
                               "write elsewhere with -o", path=self.folder, pid=pid) if pid else
                           Msg("{path}: another worked run is writing this folder; wait for it to finish, or write "
                               "elsewhere with -o", path=self.folder)) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:   # not a file the previous holder unlinked as we opened it
                break
            os.close(fd)
        self._lock_fd, self._lock_path = fd, path
        with contextlib.suppress(OSError):   # the pid only helps the message of a second run (a full disk: none)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._lock_path)
            os.close(self._lock_fd)
            self._lock_fd = None

    def _remove_debris(self) -> None:
        """Staging and old folders of runs that were killed (we hold the lock: no live run owns them)."""
        pat = re.compile(rf"^\.{re.escape(self.folder.name)}\.(tmp|old)-(\d+)$")
        for p in self.folder.parent.iterdir():
            m = pat.match(p.name)
            if m and int(m[2]) != os.getpid() and p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)

    # -- writing
    def write(self, files: dict[str, bytes]) -> None:
        try:
            for rel, data in sorted(files.items()):
                p = self.tmp / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(data)
                self.written.append(rel)
        except OSError as exc:
            raise cannot_write(self.folder, exc) from None

    def write_with(self, rel: str, write) -> None:
        """Stage *rel* by calling ``write(path)`` (for a writer that writes the file itself: no copy in memory)."""
        try:
            p = self.tmp / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            write(p)
            self.written.append(rel)
        except OSError as exc:
            raise cannot_write(self.folder, exc) from None

    def _in_scope(self, rel: str) -> bool:
        return self.scope is None or any(rel == s or rel.startswith(s.rstrip("/") + "/") for s in self.scope)

    def commit(self) -> list[Path]:
        """Swap the new set in; returns the paths written. ``self.left_alone`` lists the other files kept."""
        folder, tmp = self.folder, self.tmp
        new = sorted(set(self.written))
        clash = [f for f in new if f in self.present]
        if self.ask_to_replace and clash and not self.force:
            self.abort()
            at = dict(path=folder, files=", ".join(clash[:3]))
            raise WorkedError(Msg("{path}: {files} already exists (use --force to overwrite)", **at) if len(clash) == 1 else
                              Msg("{path}: {files} already exist (use --force to overwrite)", **at))
        try:
            keep = {f for f in self.owned if not self._in_scope(f) and f not in new}
            listed = sorted(keep | set(new))
            self.left_alone = sorted(f for f in self.foreign if f not in new)
            self.replaced_foreign = sorted(f for f in self.foreign if f in new)
            whole = (self.scope is None and not self.foreign and not keep and not self._holds_cwd())
            if not folder.exists():
                (tmp / MARKER).write_bytes(marker_text(self.kind, listed))
                os.replace(tmp, folder)
            elif whole:
                (tmp / MARKER).write_bytes(marker_text(self.kind, listed))
                if _exchange(tmp, folder):
                    shutil.rmtree(tmp)         # now the old set
                else:
                    old = folder.parent / f".{folder.name}.old-{os.getpid()}"
                    os.replace(folder, old)
                    os.replace(tmp, folder)
                    shutil.rmtree(old)
            else:
                self._commit_mixed(new, keep, listed)
        except OSError as exc:
            self.abort()
            raise cannot_write(folder, exc) from None
        except BaseException:
            self.abort()
            raise
        self._unlock()
        return [folder / f for f in new]

    def _holds_cwd(self) -> bool:
        """Swapping the folder we run in would leave our caller's shell in a removed folder: replace in place."""
        try:
            cwd, mine = Path.cwd().resolve(), self.folder.resolve()
        except OSError:
            return True
        return cwd == mine or mine in cwd.parents

    def _commit_mixed(self, new, keep, listed) -> None:
        """Other files share the folder: remove worked's old set (the marker lists old and new first,
        so a rerun after a kill knows them), then move the new files in, then the final marker."""
        folder, tmp = self.folder, self.tmp
        old = sorted(f for f in self.owned if self._in_scope(f) or f in new)
        self._write_marker(sorted(set(self.owned) | set(new)))
        for f in old:
            with contextlib.suppress(FileNotFoundError):
                (folder / f).unlink()
        for f in self.present:
            if self._is_debris(f):
                with contextlib.suppress(FileNotFoundError):
                    (folder / f).unlink()
        for f in new:
            dest = folder / f
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp / f, dest)
        self._write_marker(listed)
        for f in old:    # folders emptied by removing our files (variants/XXXX)
            d = (folder / f).parent
            while d != folder:
                try:
                    d.rmdir()
                except OSError:
                    break
                d = d.parent
        shutil.rmtree(tmp, ignore_errors=True)

    def _write_marker(self, files) -> None:
        t = self.tmp / (MARKER + ".next")
        t.write_bytes(marker_text(self.kind, files))
        os.replace(t, self.folder / MARKER)
        for name in LEGACY_MARKERS:
            with contextlib.suppress(FileNotFoundError):
                (self.folder / name).unlink()

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)
        self._unlock()

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is not None:
            self.abort()
        return False

    def note(self) -> str:
        """What the CLI says about the files it left alone ("" when none; a :class:`worked.i18n.Msg`)."""
        parts = []
        if self.left_alone:
            n = len(self.left_alone)
            at = dict(n=n, path=self.folder, files=", ".join(self.left_alone[:5]), more=n - 5)
            if n == 1:
                parts.append(Msg("left alone {n} file not written by worked in {path}: {files}", **at))
            elif n <= 5:
                parts.append(Msg("left alone {n} files not written by worked in {path}: {files}", **at))
            else:
                parts.append(Msg("left alone {n} files not written by worked in {path}: {files} and {more} more", **at))
        if self.replaced_foreign:
            parts.append(Msg("replaced (--force) in {path}: {files}", path=self.folder,
                             files=", ".join(self.replaced_foreign[:5])))
        return joined("; ", parts) if parts else ""
