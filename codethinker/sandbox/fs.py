"""File-system clean-up for :mod:`codethinker.sandbox`: private dirs of any depth, removed safely.

Not public API; used by the zygote (inside the sandbox) and by the parent (isolation "none").
A sample controls what its private dir holds: a folder chain thousands of levels deep (deeper
than the interpreter's recursion limit and longer than ``PATH_MAX``), symlinks to places it
must not make us delete, entries without read or search permission. :func:`remove_tree` walks
with one open directory at a time and relative names (``openat``/``unlinkat``), iteratively,
never following a symlink, so none of that can crash or mislead it.
"""

from __future__ import annotations

import contextlib
import os
import stat

__all__ = ["remove_tree", "reset_private_dir"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, dir_fd: int) -> int:
    """Open the sub-directory ``name`` of ``dir_fd`` (not following a symlink); give it u+rwx
    first if its owner took them away (we may be root without DAC override, or its owner)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=dir_fd, follow_symlinks=False)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _first_subdir(fd: int) -> str | None:
    """Unlink every non-directory entry of ``fd``; return the name of one sub-directory, if any.

    A pass that removed entries is followed by another (unlinking while reading a directory may
    make the reader skip entries)."""
    while True:
        removed = False
        with os.scandir(fd) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    return entry.name
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.name, dir_fd=fd)
                removed = True
        if not removed:
            return None


def _empty_dir(fd: int) -> None:
    """Remove everything below the directory open as ``fd`` (which this function closes).

    Depth-first with a stack of names (not of descriptors): descend into the first
    sub-directory found, and when a directory is empty go back up through ``..`` and remove it.
    """
    names: list[str] = []
    try:
        while True:
            sub = _first_subdir(fd)
            if sub is not None:
                child = _open_dir(sub, fd)
                os.close(fd)
                fd = child
                names.append(sub)
                continue
            if not names:
                return
            up = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = up
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)


def remove_tree(path: str) -> None:
    """Remove ``path`` (a file, a symlink or a directory tree of any depth); missing is fine.

    A symlink is removed, never followed. Errors other than "missing" propagate as ``OSError``.
    """
    parent, name = os.path.split(os.path.abspath(path))
    pfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            _empty_dir(_open_dir(name, pfd))
            os.rmdir(name, dir_fd=pfd)
        else:
            os.unlink(name, dir_fd=pfd)
    finally:
        os.close(pfd)


def reset_private_dir(path: str, uid: int | None) -> None:
    """Make ``path`` an empty directory, mode 0700, owned by ``uid`` (when we may chown).

    Cheap when the previous owner left it as it found it (one ``lstat`` and one ``scandir``);
    otherwise the tree is removed and the directory made again.
    """
    chown = uid is not None and os.geteuid() == 0
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and (not chown or st.st_uid == uid):
            with os.scandir(path) as it:
                if next(it, None) is None:
                    return
        remove_tree(path)
    os.mkdir(path, 0o700)
    if chown:
        assert uid is not None
        os.chown(path, uid, uid)
    os.chmod(path, 0o700)
