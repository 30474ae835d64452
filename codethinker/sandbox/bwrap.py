"""How :mod:`codethinker.sandbox` starts a worker slot: the bubblewrap arguments and the zygote's
command line, environment and configuration (parent side; not public API).

The sandbox sees the host read-only (``--ro-bind / /``; with ``SandboxConfig(host="system")`` only the
system folders of :data:`SYSTEM` and what the zygote reads) with fresh ``/tmp`` and ``/dev/shm``
tmpfs mounts. Whatever the zygote must read and would be hidden is bound back read-only over
those mounts: paths under ``/tmp`` or ``/dev/shm`` (a checkout, a venv or an interpreter there),
and paths below a directory the unprivileged uid cannot traverse (``/root`` for a pyenv
interpreter), over which an empty tmpfs is mounted first. The private dirs of the samples live
in the sandbox's ``/tmp`` under names that no bound path uses.

Nothing of the configuration shows in ``/proc/*/cmdline`` inside the sandbox: bubblewrap reads
its arguments from a file descriptor (``--args FD``) and the zygote reads its JSON
configuration from its stdin; the command lines are ``bwrap --args N -- PYTHON -B -S -c BOOT``
and ``PYTHON -B -S -c BOOT``.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "BOOT",
    "bwrap_args",
    "bwrap_available",
    "interpreter",
    "interpreter_paths",
    "mask_plan",
    "private_dirs",
    "site_paths",
    "system_args",
    "traversable",
    "worker_env",
    "zygote_command",
]

PROJECT_ROOT = Path(__file__).resolve().parents[2]
HASH_SEED = 0  # str hashes (so set iteration order) are the same in every worker and every run
TMPFS_BYTES = 64 * 1024 * 1024  # size of the sandbox's /tmp and /dev/shm
ALWAYS_MASKED = ("/tmp", "/dev/shm")  # fresh tmpfs mounts in every sandbox
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")  # what host="system" shows

BOOT = (
    "import json,sys;c=json.load(sys.stdin);sys.path.insert(0,c['root']);"
    "from codethinker.sandbox.worker.main import main;main(c)"
)

_BWRAP_OK: dict[str, bool] = {}


def bwrap_available() -> bool:
    """Whether ``bwrap`` is on PATH and can start a sandbox with the namespaces we use."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    if exe not in _BWRAP_OK:
        cmd = [exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        cmd += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--", "/bin/true"]
        try:
            ok = subprocess.run(cmd, capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        _BWRAP_OK[exe] = ok
    return _BWRAP_OK[exe]


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _mask_root(path: str) -> str | None:
    """The directory over which a fresh tmpfs hides ``path`` in the sandbox, if any: ``/tmp`` or
    ``/dev/shm``, else the topmost ancestor that "other" cannot traverse (``/root``)."""
    for root in ALWAYS_MASKED:
        if _under(path, root) and path != root:
            return root
    parts = Path(path).parts
    for i in range(2, len(parts) + 1):
        anc = str(Path(*parts[:i]))
        try:
            mode = os.stat(anc).st_mode
        except OSError:
            return None
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return anc
    return None


def mask_plan(paths: Iterable[str], hide: Iterable[str] = ()) -> list[tuple[str, list[str]]]:
    """``[(mask_root, [paths to bind back read-only below it]), ...]`` for the paths the zygote
    must read; roots nested in another root are merged into it. Each directory of ``hide`` is a mask
    root too (what the samples must not read: a checkout's data, a data mirror), with the paths the
    zygote needs below it bound back; one under ``/tmp`` or ``/dev/shm`` is hidden already."""
    out: dict[str, set[str]] = {}
    real = {os.path.realpath(p) for p in paths if p}
    for h in {os.path.realpath(h) for h in hide if h}:
        if os.path.isdir(h) and h != "/" and not any(_under(h, r) for r in ALWAYS_MASKED):
            out.setdefault(h, set())
    for p in real:
        root = _mask_root(p)
        if root is not None and root != p:
            out.setdefault(root, set()).add(p)
        for h in list(out):
            if h != p and _under(p, h):
                out[h].add(p)
    roots = sorted(out)
    keep = [r for r in roots if not any(r != o and _under(r, o) for o in roots)]
    plan = []
    for r in keep:
        below = set().union(*(out[o] for o in roots if _under(o, r)))
        # a path inside another bound path is bound with it; a bound path above the root unhides it
        below = {p for p in below if p != r and not any(q != p and _under(p, q) for q in below)}
        plan.append((r, sorted(below)))
    return plan


def private_dirs(plan: list[tuple[str, list[str]]], lanes: int = 2) -> list[str]:
    """The samples' private dirs in the sandbox's ``/tmp``, one per lane, each in a lane dir of
    its own (``/tmp/lane0/work`` ...), all clear of every bound path."""
    bound = [p for _root, keep in plan for p in keep]
    for k in range(1000):
        base = "/tmp/" if k == 0 else f"/tmp/sbx{k}-"
        parents = [f"{base}lane{lane}" for lane in range(lanes)]
        if not any(_under(p, d) or _under(d, p) for d in parents for p in bound):
            return [f"{d}/work" for d in parents]
    raise RuntimeError("no free name for the sandbox's private dirs under /tmp")


def interpreter_paths() -> list[str]:
    """What the zygote reads: the interpreter, its prefixes, the site-packages it imports from
    and the project's package."""
    exe = os.path.realpath(sys.executable)
    paths = [interpreter(), sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.dirname(exe))]
    return [*paths, *site_paths(), str(PROJECT_ROOT / "codethinker")]


def traversable(path: str) -> bool:
    """Whether any uid can reach ``path`` (o+x on it and every ancestor)."""
    p = Path(os.path.realpath(path))
    for anc in (p, *p.parents):
        try:
            if not os.stat(anc).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def site_paths() -> list[str]:
    """The parent's site-packages, appended to the zygote's path (its site module is skipped)."""
    return [p for p in sys.path if p.endswith("-packages") and os.path.isdir(p)]


def worker_env() -> dict[str, str]:
    """The whole environment of a zygote (nothing of the parent's)."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": str(HASH_SEED),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def system_args(needed: Iterable[str]) -> list[str]:
    """The mounts of a sandbox that sees only the host's system folders (:data:`SYSTEM`, a link such as
    ``/bin -> usr/bin`` kept as a link) and the paths of ``needed`` outside them (the interpreter, its
    site-packages, the project's package), each bound read-only at its real place; paths under ``/tmp``
    or ``/dev/shm`` are left to the mask plan."""
    args: list[str] = []
    shown = []
    for d in SYSTEM:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
            shown.append(d)
    real = {os.path.realpath(p) for p in needed if p and os.path.exists(p)}
    real = {p for p in real if not any(_under(p, r) for r in (*shown, *ALWAYS_MASKED, *map(os.path.realpath, shown)))}
    made: set[str] = set()
    for p in sorted(real):
        if not any(q != p and _under(p, q) for q in real):
            for anc in reversed(Path(p).parents[:-1]):  # folders bwrap would make 0700: "other" must pass
                if str(anc) not in made:
                    made.add(str(anc))
                    args += ["--perms", "0755", "--dir", str(anc)]
            args += ["--ro-bind", p, p]
    return args


def bwrap_args(plan: list[tuple[str, list[str]]], system: list[str] | None = None) -> list[str]:
    """The options of ``bwrap`` (passed through ``--args FD``, so they never show in
    ``/proc/1/cmdline``), without the command: the whole host read-only, or, given ``system``
    (:func:`system_args`), only those mounts; then the mask ``plan`` (a root the sandbox does not
    show at all is skipped: what it needs is among ``system``'s mounts)."""
    args = ["--ro-bind", "/", "/"] if system is None else list(system)
    args += ["--dev", "/dev", "--proc", "/proc"]
    for root in ALWAYS_MASKED:
        args += ["--size", str(TMPFS_BYTES), "--tmpfs", root]
    for root, keep in plan:
        if system is not None and root not in ALWAYS_MASKED and not _shown(root, system):
            continue
        if root not in ALWAYS_MASKED:
            args += ["--perms", "0755", "--tmpfs", root]
        made: set[str] = set()
        for p in keep:
            rel = Path(p).relative_to(root).parts
            for i in range(1, len(rel)):
                d = str(Path(root, *rel[:i]))
                if d not in made:
                    made.add(d)
                    args += ["--perms", "0755", "--dir", d]
            args += ["--ro-bind", p, p]
    args += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    args += ["--die-with-parent", "--new-session", "--clearenv"]
    for key, value in worker_env().items():
        args += ["--setenv", key, value]
    return [*args, "--chdir", "/"]


def _shown(path: str, system: list[str]) -> bool:
    """Whether ``path`` lies in a folder that ``system``'s ``--ro-bind`` mounts show."""
    binds = [system[i + 2] for i, a in enumerate(system) if a == "--ro-bind"]
    return any(_under(path, b) for b in binds)


def interpreter() -> str:
    """The interpreter as the sandbox sees it: ``sys.executable`` with its folders resolved (a venv
    reached through a symbolic link, e.g. ``.venv -> /elsewhere/venv``, is bound at its real place, so
    the link's own path may not exist in the sandbox), its file name kept (a venv's ``bin/python`` is a
    link to the base interpreter: resolving it would leave the venv)."""
    exe = sys.executable
    return os.path.join(os.path.realpath(os.path.dirname(exe)), os.path.basename(exe))


def zygote_command() -> list[str]:
    """The zygote's command line (its configuration comes on stdin)."""
    return [interpreter(), "-B", "-S", "-c", BOOT]
