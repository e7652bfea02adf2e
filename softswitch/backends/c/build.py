"""Compile generated C with the system compiler, cache the shared object, load it in process (ctypes).

The cache key is a hash of everything that decides the object's bytes: the
generated source (which depends on the program and on the generator's
version), the runtime header `p4rt.h`, the compiler's identity and the
flags. Objects are written to a temporary name and renamed into place, so
concurrent switches never load a half-written file. The cache lives in
`$P4REDUCE_CACHE_DIR`, else `$XDG_CACHE_HOME/p4reduce/softswitch-c`, else
`~/.cache/p4reduce/softswitch-c`; the generated `.c` is kept beside its
`.so` for reading.

`P4REDUCE_SANITIZE=address` builds with AddressSanitizer (the process
must then preload libasan: `make asan-switch` does).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from softswitch.backends.c.codegen import GENERATOR_VERSION
from softswitch.backends.common import UnsupportedError

HEADER = Path(__file__).with_name("p4rt.h")
FLAGS = ("-O2", "-std=gnu11", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wno-unused-function")
SANITIZERS = {"address": ("-fsanitize=address", "-fno-omit-frame-pointer", "-g")}
_lock = threading.Lock()
_loaded: dict[Path, ctypes.CDLL] = {}


class CompilerMissing(UnsupportedError):
    """No C compiler on this machine."""


class BuildError(UnsupportedError):
    """The system compiler refused the generated code (a backend bug: the message says where)."""


def compiler() -> str | None:
    """The C compiler to use: $CC, else cc, gcc or clang on PATH; None when there is none."""
    for candidate in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    return None


@functools.lru_cache(maxsize=4)
def _identity(cc: str) -> str:
    try:
        result = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except OSError as error:
        raise CompilerMissing(f"the C compiler {cc} cannot run: {error.strerror}") from None
    return f"{cc}\n{result.stdout}"


def flags(cc: str) -> tuple[str, ...]:
    sanitize = os.environ.get("P4REDUCE_SANITIZE", "")
    if sanitize and sanitize not in SANITIZERS:
        raise UnsupportedError(f"P4REDUCE_SANITIZE={sanitize}: expected one of {sorted(SANITIZERS)}")
    tuning: tuple[str, ...] = ()
    if "Free Software Foundation" in _identity(cc) and platform.machine() in ("x86_64", "AMD64"):
        # The packet's state is zeroed and each multicast replica copied: GCC's default for such
        # blocks (rep stos/movs) costs a fifth of a packet's time; SIMD loops do not.
        tuning = ("-mstringop-strategy=vector_loop",)
    return FLAGS + tuning + SANITIZERS.get(sanitize, ())


def cache_dir() -> Path:
    if os.environ.get("P4REDUCE_CACHE_DIR"):
        return Path(os.environ["P4REDUCE_CACHE_DIR"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "p4reduce" / "softswitch-c"


def cache_key(source: str, cc: str, options: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for part in (str(GENERATOR_VERSION), HEADER.read_text(), source, _identity(cc), " ".join(options)):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def build(source: str, name: str = "program") -> Path:
    """The shared object of `source`, compiled now or taken from the cache."""
    cc = compiler()
    if cc is None:
        raise CompilerMissing("no C compiler found (set $CC, or install build-essential)")
    options = flags(cc)
    directory = cache_dir()
    key = cache_key(source, cc, options)
    target = directory / f"{name}-{key}.so"
    if target.exists():
        return target
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".build-") as tmp:
        c_file = Path(tmp) / f"{name}.c"
        c_file.write_text(source)
        so_file = Path(tmp) / f"{name}.so"
        command = [cc, *options, "-I", str(HEADER.parent), "-o", str(so_file), str(c_file)]
        result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        if result.returncode != 0:
            first = "\n".join(result.stderr.strip().splitlines()[:12])
            raise BuildError(f"the C compiler refused the generated code ({' '.join(command)}):\n{first}")
        os.replace(c_file, target.with_suffix(".c"))
        os.replace(so_file, target)
    return target


def load(path: Path) -> ctypes.CDLL:
    """The library at `path`, loaded once per process (its state lives in contexts it creates)."""
    with _lock:
        lib = _loaded.get(path)
        if lib is None:
            lib = _loaded[path] = ctypes.CDLL(str(path))
        return lib
