"""The settings of a :class:`~codethinker.sandbox.Sandbox`: :class:`SandboxConfig` (what a caller
chooses) and the fixed limits every sample runs under."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SandboxConfig"]

MAX_SOURCE_CHARS = 1_000_000
FSIZE_BYTES = 32 * 1024 * 1024  # RLIMIT_FSIZE
NOFILE = 64  # RLIMIT_NOFILE
NPROC = 1  # RLIMIT_NPROC under the unprivileged uid: the process itself, no fork, no threads
START_TIMEOUT_S = 60.0  # a zygote or sample process not ready by then is killed
MAX_START_FAILURES = 3  # consecutive start failures before the sandbox gives up
UID_RANGE = 1000  # uids per Sandbox: base + LANES * slot + lane


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and pool settings of a :class:`Sandbox`."""

    timeout_s: float = field(default=2.0, metadata={"help": "wall-clock limit per sample, seconds"})
    memory_mb: int = field(default=1024, metadata={"help": "address-space cap per sample beyond its baseline, MiB"})
    workers: int | None = field(default=None, metadata={"help": "samples run in parallel (default: os.cpu_count())"})
    output_limit: int = field(default=65536, metadata={"help": "bytes of stdout and of stderr kept per sample"})
    isolation: str = field(
        default="auto",
        metadata={"help": "'bwrap' | 'none' | 'auto' (bwrap when it works here, else none with a warning)"},
    )
    max_tasks_per_worker: int | None = field(
        default=None,
        metadata={
            "help": "start a fresh sandbox (bwrap + zygote) for a slot after this many samples (None: never); "
            "every sample runs in a fresh process in any case"
        },
    )
    grace_s: float | None = field(
        default=None,
        metadata={"help": "parent-side SIGKILL after timeout_s + grace_s (default 1 + timeout_s / 2)"},
    )
    hide: tuple[str, ...] = field(
        default=(),
        metadata={
            "help": "host directories the samples must not read (bwrap: an empty tmpfs over each, with what "
            "the interpreter needs below it bound back read-only), e.g. a checkout's data and the data mirror"
        },
    )
    host: str = field(
        default="all",
        metadata={
            "help": "what of the host a sample sees (bwrap): 'all' (everything read-only but hide) | 'system' (only "
            "/usr, /bin, /lib*, /etc and what the interpreter needs: a copy of the answers anywhere else is absent)"
        },
    )
    uid_base: int | None = field(
        default=None,
        metadata={"help": "first unprivileged uid for samples when root (default derived from the pid)"},
    )

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError("timeout_s must be > 0")
        if self.memory_mb is not None and self.memory_mb < 0:
            raise ValueError("memory_mb must be >= 0 (0: no cap)")
        if self.workers is not None and self.workers < 1:
            raise ValueError("workers must be >= 1")
        if self.output_limit < 0:
            raise ValueError("output_limit must be >= 0")
        if self.isolation not in ("bwrap", "none", "auto"):
            raise ValueError("isolation must be 'bwrap', 'none' or 'auto'")
        if isinstance(self.hide, str) or not all(isinstance(h, str) for h in self.hide):
            raise ValueError("hide must be a tuple of paths")
        if self.host not in ("all", "system"):
            raise ValueError("host must be 'all' or 'system'")
        if self.max_tasks_per_worker is not None and self.max_tasks_per_worker < 1:
            raise ValueError("max_tasks_per_worker must be >= 1")
