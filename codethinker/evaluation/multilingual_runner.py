"""CRUXEval-X's isolated polyglot runner (for :mod:`codethinker.evaluation.multilingual`): the
per-language table ``LANGS`` and the compile and run steps, each a sandbox of its own.

``LANGS``: each language's argv templates (``{tool}``: the first of its tools on PATH, for Python this
interpreter; ``{src}``, ``{main}``; lists set up once a process: ``{pch}`` C++'s precompiled
``bits/stdc++.h``, ``{dflags}`` D's, ``{cp}`` Java's classpath), environment, memory and failure
marks, and the literal syntax the guard reads. :func:`execute` compiles where the language does (C++,
C#, D, Go, Java, Rust, Scala, Swift, TypeScript; Java in batches of 32, one javac, a package per
program, files with errors dropped and the rest recompiled) and runs each program, on ``workers``
threads. A run passes when it exits 0 (C# and Racket also fail on a failure report in their output).

Isolation: each compile and each run is a bubblewrap sandbox (masks as :mod:`codethinker.sandbox.bwrap`): no
network, host read-only, a fresh 64 MiB ``/tmp`` (1 GiB when compiling), private pid/ipc/uts
namespaces, cleared environment; the program's dir is writable only while compiling. As root the
command runs under an unprivileged uid (one per parallel slot; ``setpriv``, no capabilities) with
``prlimit``: address space 4 GiB a run (Scala 8, Julia 16) and 8 GiB a compile, CPU 4x the timeout,
files 64 MiB (stdout/stderr are files: output is capped too), 256 files, 512 processes. A timeout
SIGKILLs the process group; the pid namespace ends every descendant with it. Not covered: an exit 0
that the program makes itself (keeping such literals out is the guard's part).

Runtimes: this machine (Debian 12) has g++, javac/java 17, rustc, node 20, perl (without Test::Deep),
bash and Python, so C++, Java, Rust, JavaScript, Bash and Python run. Java uses the javatuples jar
where installed (Debian ``libjavatuples-java``; absent here), else a compatible ``org.javatuples``
compiled from :func:`_javatuples`. Bash runs with ``LANG=C`` and a ``python`` on PATH, as CRUXEval-X's
image has (its oracle needs both); the others with ``C.UTF-8``; Python with ``PYTHONHASHSEED=0``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from codethinker.evaluation.task import CRUXEVAL_X_LANGUAGES, Verdict
from codethinker.sandbox import bwrap as bw

__all__ = ["LANGS", "Lang", "Runner", "Step", "execute", "make_runner", "resolve_tool"]

JAVA_BATCH = 32
MIB = 1024 * 1024

C_LIKE = ("//", "/*")


@dataclass(frozen=True)
class Lang:
    """How one language's answers are guarded, compiled and run (argv templates: {tool} {src}, and
    list placeholders set up per language: {pch} {dflags} {cp})."""

    key: str
    display: str
    src: str  # the program's file name
    tools: tuple[str, ...]  # alternatives for {tool}, the first one on PATH
    run: tuple[str, ...] = ("{tool}", "{src}")
    compile: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()  # further binaries that must be on PATH
    probe: tuple[str, ...] = ("{tool}", "--version")  # must exit 0 in the sandbox
    quotes: str = "\"'"
    raw: str = ""  # quotes without backslash escapes
    comments: tuple[str, ...] = C_LIKE
    forbid: tuple[str, ...] = ()  # substrings refused anywhere
    interp: str = ""  # a prefix that makes the next string literal interpolate code (refused)
    env: tuple[tuple[str, str], ...] = ()
    fail_marks: tuple[str, ...] = ()  # output that means a failed check despite exit 0
    stderr_fails: bool = False
    memory_mb: int = 4096  # RLIMIT_AS of a run
    stop: str = ""  # where the check begins in `code` when `code` does not end as output_reasoning


_VM = ("-Xmx512m", "-Xss16m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData")
_GO_ENV = (("GO111MODULE", "off"), ("GOCACHE", "/tmp/.gocache"), ("GOPATH", "/tmp/go"), ("GOTOOLCHAIN", "local"))
# fmt: off
LANGS = {lang.key: lang for lang in (
    Lang("cpp", "C++", "prog.cpp", ("g++",), ("./prog",), ("{tool}", "-std=c++17", "{pch}", "-o", "prog", "{src}")),
    Lang("cs", "C#", "prog.cs", ("csc", "mcs"), ("mono", "prog.exe"), ("{tool}", "-d:DEBUG", "-r:System.Numerics.dll",
         "-out:prog.exe", "{src}"), ("mono",), interp=r"@?\$@?", env=(("MONO_TRACE_LISTENER", "Console.Error"),),
         fail_marks=("DefaultTraceListener.Fail", "Unhandled Exception")),
    Lang("d", "D", "prog.d", ("ldc2", "dmd", "gdc"), ("./prog",), ("{tool}", "{dflags}", "{src}"), quotes="\"'`",
         raw="`", comments=(*C_LIKE, "/+"), stop="unittest"),
    Lang("go", "Go", "prog_test.go", ("go",), ("./prog.test",), ("{tool}", "test", "-c", "-o", "prog.test", "{src}"),
         probe=("{tool}", "version"), quotes="\"'`", raw="`", env=(*_GO_ENV, ("CGO_ENABLED", "0"))),
    Lang("java", "Java", "Problem.java", ("javac",), ("java", "-ea", *_VM, "-cp", "{cp}", "{main}"), ("{tool}",),
         ("java",), ("{tool}", "-version")),
    Lang("jl", "Julia", "prog.jl", ("julia",), ("{tool}", "--startup-file=no", "--history-file=no", "{src}"),
         comments=("#",), forbid=("$(",), memory_mb=16384, stop="using Test"),
    Lang("js", "JavaScript", "prog.js", ("node",), quotes="\"'`", forbid=("${",)),
    Lang("lua", "Lua", "prog.lua", ("lua", "lua5.4", "lua5.3"), probe=("{tool}", "-e", "require('luaunit')"),
         comments=("--",)),
    Lang("php", "PHP", "prog.php", ("php",), comments=(*C_LIKE, "#"), forbid=("{$", "${", "`")),
    Lang("pl", "Perl", "prog.pl", ("perl",), probe=("{tool}", "-MTest::Deep", "-e", "1"), comments=("#",),
         forbid=("@{[", "${\\", "`")),
    Lang("py", "Python", "prog.py", ("python3",), ("{tool}", "-S", "{src}"), comments=("#",),
         interp="(?i)[rbu]*f[rbu]*", env=(("PYTHONHASHSEED", "0"),)),
    Lang("r", "R", "prog.r", ("Rscript",), comments=("#",)),
    Lang("rb", "Ruby", "prog.rb", ("ruby",), comments=("#",), forbid=("#{", "`", "%x")),
    Lang("rkt", "Racket", "prog.rkt", ("racket",), probe=("{tool}", "-e", "(require rackunit)"), quotes='"',
         comments=(";", "#|", "#;"), stderr_fails=True),
    Lang("rs", "Rust", "prog.rs", ("rustc",), ("./prog",), ("{tool}", "-o", "prog", "{src}")),
    Lang("scala", "Scala", "prog.scala", ("scalac",), ("scala", "-J-Xmx512m", "-cp", ".", "Problem"),
         ("{tool}", "-d", ".", "{src}"), ("scala",), ("{tool}", "-version"), interp=r"\w+", memory_mb=8192),
    Lang("sh", "Bash", "prog.sh", ("bash",), raw="'", comments=(), forbid=("`", "$("), env=(("LANG", "C"),)),
    Lang("swift", "Swift", "prog.swift", ("swiftc",), ("./prog",), ("{tool}", "{src}", "-o", "prog"), forbid=("\\(",)),
    Lang("ts", "TypeScript", "prog.ts", ("tsc",), ("node", "prog.js"), ("{tool}", "--target", "esnext", "{src}"),
         ("node",), quotes="\"'`", forbid=("${",)),
)}
# fmt: on
assert sorted(LANGS) == sorted(CRUXEVAL_X_LANGUAGES)
D_FLAGS = {"gdc": ["-funittest", "-o", "prog"], "ldc2": ["-unittest", "-of=prog"], "dmd": ["-unittest", "-of=prog"]}

_PCH_OK = re.compile(r"(\s*#include\s*<[\w./]+>\s*\n)*\s*#include\s*<bits/stdc\+\+\.h>")
_JAVAC = ("javac", "-J-Xmx1g", "-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1", "-J-XX:-UsePerfData")
_JAVAC += ("-encoding", "UTF8", "-proc:none", "-nowarn", "-Xmaxerrs", "100000")

_TUPLE = """public abstract class Tuple implements Iterable<Object>, Comparable<Tuple>, java.io.Serializable {
  protected final Object[] v;
  protected Tuple(Object... v) { this.v = v; }
  public int getSize() { return v.length; }
  public Object getValue(int i) { return v[i]; }
  public boolean contains(Object o) { return toList().contains(o); }
  public List<Object> toList() { return Collections.unmodifiableList(Arrays.asList(v.clone())); }
  public Object[] toArray() { return v.clone(); }
  public Iterator<Object> iterator() { return toList().iterator(); }
  public final boolean equals(Object o) { return o != null && o.getClass() == getClass() && Arrays.equals(v, ((Tuple) o).v); }
  public final int hashCode() { return 31 + Arrays.hashCode(v); }
  public String toString() { return Arrays.toString(v); }
  @SuppressWarnings("unchecked") public int compareTo(Tuple o) {
    for (int i = 0; i < Math.min(v.length, o.v.length); i++) {
      int c = ((Comparable<Object>) v[i]).compareTo(o.v[i]); if (c != 0) return c; }
    return Integer.compare(v.length, o.v.length); }
}"""  # noqa: E501


_TUPLE_N = """@SuppressWarnings("unchecked") public final class {name}<{g}> extends Tuple {{
  public {name}({ps}) {{ super({xs}); }}
  public static <{g}> {name}<{g}> with({ps}) {{ return new {name}<>({xs}); }}
  public static <X> {name}<{xg}> fromCollection(Collection<X> c) {{ Object[] a = c.toArray(); return new {name}<>({cast}); }}
{getters}
}}"""  # noqa: E501
_GET = "  public {t} getValue{k}() {{ return ({t}) v[{k}]; }}\n  public <Y> {name}<{sub}> setAt{k}(Y y) {{ return new {name}<>({call}); }}"  # noqa: E501


def _javatuples() -> dict[str, str]:
    """``org.javatuples`` (Tuple, Unit..Quintet: with, getValueN, setAtN, fromCollection; equals,
    hashCode, toString and compareTo as the jar's) for machines without the jar."""
    src = {"Tuple": _TUPLE}
    for n, name in enumerate(("Unit", "Pair", "Triplet", "Quartet", "Quintet"), start=1):
        ts = [chr(65 + k) for k in range(n)]
        getters = []
        for k, t in enumerate(ts):
            sub = ", ".join("Y" if j == k else u for j, u in enumerate(ts))
            call = ", ".join("y" if j == k else f"getValue{j}()" for j in range(n))
            getters.append(_GET.format(t=t, k=k, name=name, sub=sub, call=call))
        src[name] = _TUPLE_N.format(
            name=name, g=", ".join(ts), ps=", ".join(f"{t} x{k}" for k, t in enumerate(ts)), xg=", ".join("X" * n),
            xs=", ".join(f"x{k}" for k in range(n)), cast=", ".join(f"(X) a[{k}]" for k in range(n)),
            getters="\n".join(getters),
        )  # fmt: skip
    return {k: f"package org.javatuples;\nimport java.util.*;\n{v}\n" for k, v in src.items()}


@dataclass
class Step:
    rc: int
    timed_out: bool
    out: str
    err: str


@dataclass
class Runner:
    """Compiles and runs one language's programs, each step a bubblewrap sandbox of its own."""

    lang: Lang
    tool: str
    workers: int
    timeout_s: float = 5.0
    compile_timeout_s: float = 60.0
    extra: dict[str, list[str]] = field(default_factory=dict)  # the list placeholders, "path": more PATH
    visible: list[str] = field(default_factory=list)  # host paths the sandbox must see

    def __post_init__(self) -> None:
        base = 200_000 + (os.getpid() % 1000) * 256
        self._uids, self._lock = list(range(base, base + self.workers)), threading.Lock()

    def argv(self, template: Sequence[str], **kw: str | list[str]) -> list[str]:
        """``template`` with {tool} {src} {main} and the list placeholders (``kw`` overrides) filled in."""
        out: list[str] = []
        for a in template:
            key = a.strip("{}")
            if key in self.extra and a == f"{{{key}}}":
                out += list(kw.get(key) or self.extra[key])
            else:
                out.append(a.format(tool=self.tool, src=self.lang.src, main=kw.get("main", "")))
        return out

    def _bwrap(self, argv: list[str], work: str, compiling: bool, uid: int) -> list[str]:
        args = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        args += ["--perms", "1777", "--size", str((1024 if compiling else 64) * MIB), "--tmpfs", "/tmp"]
        for root, keep in bw.mask_plan(self.visible):
            args += [] if root == "/tmp" else ["--perms", "0755", "--tmpfs", root]
            for p in keep:  # the dirs between root and p: traversable by the uid
                for d in list(Path(p).relative_to(root).parents)[-2::-1]:
                    args += ["--perms", "0755", "--dir", str(Path(root, d))]
                args += ["--ro-bind", p, p]
        args += ["--bind" if compiling else "--ro-bind", work, "/tmp/prog", "--chdir", "/tmp/prog"]
        args += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        args += ["--die-with-parent", "--new-session", "--clearenv"]
        path = [*self.extra.get("path", []), str(Path(self.tool).parent), "/usr/local/bin", "/usr/bin", "/bin"]
        env = {"PATH": ":".join(dict.fromkeys(path)), "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
        for k, v in {**env, **dict(self.lang.env)}.items():
            args += ["--setenv", k, v]
        mem, cpu = (8192, self.compile_timeout_s) if compiling else (self.lang.memory_mb, self.timeout_s)
        args += ["--", "prlimit", f"--as={mem * MIB}", f"--cpu={int(4 * cpu) + 1}", f"--fsize={64 * MIB}"]
        args += ["--nofile=256", "--nproc=512", "--core=0", "--"]
        if os.geteuid() == 0:
            args += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all"]
            args += ["--bounding-set=-all", "--no-new-privs", "--"]
        return args + argv

    def step(self, argv: list[str], work: str, *, compiling: bool) -> Step:
        """Run ``argv`` in ``work`` (writable while compiling) under the step's limits."""
        with self._lock:
            uid = self._uids.pop()
        try:
            if compiling and os.geteuid() == 0:
                subprocess.run(["chown", "-R", f"{uid}:{uid}", work], check=True)
            limit = self.compile_timeout_s if compiling else self.timeout_s
            with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
                cmd = self._bwrap(argv, work, compiling, uid)
                p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, start_new_session=True)
                try:
                    rc, timed_out = p.wait(limit), False
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(p.pid, signal.SIGKILL)
                    rc, timed_out = p.wait(), True
                return Step(rc, timed_out, _tail(fo), _tail(fe))
        finally:
            if compiling:
                subprocess.run(["chmod", "-R", "a+rX", work], check=False)
            with self._lock:
                self._uids.append(uid)

    def verdict(self, s: Step) -> Verdict:
        """The verdict of a program's run step."""
        if s.timed_out:
            return Verdict(False, "timeout", f"no exit within {self.timeout_s:g} s")
        bad = any(m in s.out + s.err for m in self.lang.fail_marks) or (self.lang.stderr_fails and s.err.strip())
        if s.rc or bad:
            return Verdict(False, "fail", f"exit {s.rc}: {(s.err or s.out)[-300:]}")
        return Verdict(True, "pass")


def _tail(f, keep: int = 4096) -> str:
    f.seek(max(0, f.seek(0, os.SEEK_END) - keep))
    return f.read().decode("utf-8", "replace")


_CACHE: dict[str, object] = {}
_CACHE_LOCK = threading.RLock()


def _cache_dir() -> Path:
    """A per-process dir (removed at exit) for the C++ PCH, the javatuples classes, bash's ``python``."""
    with _CACHE_LOCK:
        if "dir" not in _CACHE:
            _CACHE["dir"] = d = Path(tempfile.mkdtemp(prefix="ct-crux-x-"))
            d.chmod(0o755)
            atexit.register(shutil.rmtree, d, True)
        return _CACHE["dir"]  # type: ignore[return-value]


def _setup(key: str, tool: str) -> tuple[dict[str, list[str]], list[str]]:
    """``({placeholder: argv}, host paths to show)`` of a language, built once (trusted commands)."""
    with _CACHE_LOCK:
        if key not in _CACHE:
            root, extra, visible = _cache_dir(), {}, [tool, str(Path(tool).parent.parent)]
            if key == "cpp":
                extra["pch"] = _pch(tool, root / "pch")
                visible += [str(root / "pch")]
            elif key == "java":
                jar = "/usr/share/java/javatuples.jar"
                if not os.path.isfile(jar):
                    (src := root / "jt-src").mkdir()
                    for name, text in _javatuples().items():
                        (src / f"{name}.java").write_text(text)
                    jar = str(root / "jt")
                    cmd = [tool, "-nowarn", "-d", jar, *map(str, src.glob("*.java"))]
                    subprocess.run(cmd, capture_output=True, check=True, timeout=300)
                extra.update(cp=[f".:{jar}"], jar=[jar])
                visible += [jar]
            elif key == "sh":  # CRUXEval-X's image has `python` (a few programs call it)
                (root / "bin").mkdir()
                (root / "bin/python").symlink_to(os.path.realpath(sys.executable))
                extra["path"], visible = [str(root / "bin")], [*visible, str(root / "bin"), sys.base_prefix]
            elif key == "d":
                extra["dflags"] = D_FLAGS[Path(tool).name]
            _CACHE[key] = (extra, visible)
        return _CACHE[key]  # type: ignore[return-value]


def _pch(tool: str, out: Path) -> list[str]:
    """The g++ flags that use a precompiled ``bits/stdc++.h`` built in ``out`` (none where it fails)."""
    dep = subprocess.run([tool, "-std=c++17", "-x", "c++", "-M", "-"], input="#include <bits/stdc++.h>\n",
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    header = next((w for w in dep.stdout.split() if w.endswith("bits/stdc++.h")), None)
    if header is None:
        return ["-std=c++17"]
    (out / "bits").mkdir(parents=True)
    (out / "bits/stdc++.h").symlink_to(header)
    cmd = [tool, "-std=c++17", "-x", "c++-header", header, "-o", str(out / "bits/stdc++.h.gch")]
    if subprocess.run(cmd, capture_output=True, timeout=600).returncode != 0:
        return ["-std=c++17"]
    return [f"-I{out}", "-include", "bits/stdc++.h", "-Winvalid-pch"]


def resolve_tool(lang: Lang) -> str | None:
    """The host path of the language's compiler/interpreter, or None."""
    if lang.key == "py":
        return os.path.realpath(sys.executable)
    found = next((p for p in map(shutil.which, lang.tools) if p), None)
    if found and lang.key == "rs":  # the toolchain's own rustc, not rustup's proxy
        sysroot = subprocess.run([found, "--print", "sysroot"], capture_output=True, text=True, timeout=60)
        found = str(Path(sysroot.stdout.strip(), "bin/rustc")) if sysroot.returncode == 0 else None
    return found


def _compile_java(r: Runner, work: Path, ks: list[int]) -> dict[int, Verdict]:
    """Compile ``work/p<k>/Problem.java`` for ``ks`` in one javac; the verdicts of those that fail."""
    s = r.step([*_JAVAC, "-cp", *r.extra["jar"], "-d", ".", *(f"p{k}/Problem.java" for k in ks)], str(work),
               compiling=True)  # fmt: skip
    if s.rc == 0 and not s.timed_out:
        return {}
    text = s.out + s.err
    if len(ks) == 1:
        return {ks[0]: Verdict(False, "timeout" if s.timed_out else "error", f"compile: {text[-300:]}")}
    failed = {int(k) for k in re.findall(r"^p(\d+)/Problem\.java:\d+: error", text, re.M)} & set(ks)
    lines = {k: "\n".join(re.findall(rf"^p{k}/.*", text, re.M)) for k in failed}
    bad = {k: Verdict(False, "error", f"compile: {lines[k][-300:]}") for k in failed}
    for part in [[k for k in ks if k not in failed]] if failed else [[k] for k in ks]:
        bad.update(_compile_java(r, work, part) if part else {})
    return bad


def _compile_one(r: Runner, work: Path, src: str) -> Verdict | None:
    kw = {"pch": ["-std=c++17"]} if r.lang.key == "cpp" and not _PCH_OK.match(src) else {}
    s = r.step(r.argv(r.lang.compile, **kw), str(work), compiling=True)
    if s.timed_out:
        return Verdict(False, "timeout", f"compile: no exit within {r.compile_timeout_s:g} s")
    return None if s.rc == 0 else Verdict(False, "error", f"compile: {(s.err or s.out)[-300:]}")


def execute(r: Runner, sources: Sequence[str]) -> list[Verdict]:
    """Compile (where the language does) and run every program; one verdict each."""
    base, java, n = Path(tempfile.mkdtemp(prefix="ct-crux-x-run-")), r.lang.key == "java", len(sources)
    try:
        base.chmod(0o711)
        works = []
        for k, src in enumerate(sources):
            (d := base / (f"b{k // JAVA_BATCH}/p{k}" if java else str(k))).mkdir(parents=True)
            (d / r.lang.src).write_text(f"package p{k};\n{src}" if java else src)
            works.append(d.parent if java else d)
        with ThreadPoolExecutor(r.workers) as pool:
            done: dict[int, Verdict] = {}
            if java:
                groups = [list(range(s, min(s + JAVA_BATCH, n))) for s in range(0, n, JAVA_BATCH)]
                for bad in pool.map(lambda g: _compile_java(r, works[g[0]], g), groups):
                    done.update(bad)
            elif r.lang.compile:
                compiled = pool.map(lambda k: _compile_one(r, works[k], sources[k]), range(n))
                done.update((k, v) for k, v in enumerate(compiled) if v is not None)
            todo = [k for k in range(n) if k not in done]
            run = lambda k: r.step(r.argv(r.lang.run, main=f"p{k}.Problem"), str(works[k]), compiling=False)  # noqa: E731
            runs = pool.map(run, todo)
            done.update({k: r.verdict(s) for k, s in zip(todo, runs, strict=True)})
        return [done[k] for k in range(n)]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def make_runner(lang: Lang, workers: int, timeout_s: float, compile_timeout_s: float) -> Runner:
    """The language's runner (its tool resolved, its one-off setup done); RuntimeError where the tool is missing."""
    if (tool := resolve_tool(lang)) is None:
        raise RuntimeError(f"runtime missing: {' or '.join(lang.tools)}")
    extra, visible = _setup(lang.key, tool)
    visible = [*visible, *(os.path.realpath(shutil.which(n) or n) for n in lang.needs)]
    return Runner(lang, tool, workers, timeout_s, compile_timeout_s, extra, visible)
