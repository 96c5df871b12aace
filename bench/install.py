"""The programs the benchmark runs, installed the way their users install them.

The console: a wheel built from this checkout (`pip wheel --no-deps`, built from a copy of what a
clone holds, with a fixed SOURCE_DATE_EPOCH so that the same sources give the same bytes) is
installed with its dependencies into a fresh virtual environment under the output directory,
bytecode compiled at install (pip's default) and PYTHONDONTWRITEBYTECODE unset. The environment is
made `--without-pip`, so nothing but the console and its dependencies is in it: no editable-install
finder, no setuptools `.pth` hook. Its interpreter, started `-I`, is the clean baseline every
start-up figure is held against. The environment is cached by the wheel's SHA-256: a run with the
same sources reuses it. When the dependencies cannot be installed (no index reachable), the run
says so and falls back to the checkout's editable install, labelled as such in every figure.

Harlequin (the TUI's peer, bench/harlequin.py) gets its own cached environment the same way,
keyed by the requirement.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench import harness as h

HARLEQUIN = "harlequin"  # the requirement; ARCHON_BENCH_HARLEQUIN_REQ pins another
TIMEOUT = 900


@dataclass(frozen=True)
class Install:
    """Where a program was installed and how to describe it in a figure."""

    python: Path  # the environment's interpreter (the clean baseline's too)
    script: Path | None  # the console script, None if not installed
    kind: str  # "wheel", "editable" or "missing"
    label: str  # what the table says about it
    note: str = ""


def _pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(argv: list, log: Path) -> subprocess.CompletedProcess:
    with open(log, "a") as out:
        out.write("$ " + " ".join(map(str, argv)) + "\n")
        out.flush()
        return subprocess.run([str(a) for a in argv], stdout=out, stderr=subprocess.STDOUT, env=_pip_env(),
                              timeout=TIMEOUT, cwd=h.out_dir())


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else "no output"


def _clone(into: Path) -> Path:
    """What a clone holds for the package (no .venv, egg-info or __pycache__ of this checkout)."""
    shutil.rmtree(into, ignore_errors=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "__snapshots__")
    for name in ("console", "widgets"):
        shutil.copytree(h.ROOT / name, into / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(h.ROOT / name, into / name)
    return into


def _editable(reason: str) -> Install:
    script = Path(sys.executable).with_name("archon-console")
    print(f"   console install: EDITABLE (fallback): {reason}", flush=True)
    return Install(Path(sys.executable), script if script.exists() else None, "editable",
                   "editable install (fallback)", reason)


def _new_venv(path: Path, log: Path) -> bool:
    shutil.rmtree(path, ignore_errors=True)
    return _run([sys.executable, "-m", "venv", "--without-pip", path], log).returncode == 0


def _pip(venv: Path, *args) -> list:
    return [sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--compile", *args]


def build_wheel() -> Path:
    root = h.out_dir() / "install"
    root.mkdir(exist_ok=True)
    log = root / "build.log"
    log.unlink(missing_ok=True)
    wheels = root / "wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    src = _clone(root / "src")
    env_epoch = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = "315532800"  # 1980-01-01: the same sources give the same wheel
    try:
        built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                      "-w", wheels, src], log)
    finally:
        if env_epoch is None:
            os.environ.pop("SOURCE_DATE_EPOCH")
        else:
            os.environ["SOURCE_DATE_EPOCH"] = env_epoch
    found = sorted(wheels.glob("archon_console-*.whl"))
    if built.returncode != 0 or not found:
        raise RuntimeError(f"pip wheel failed ({log}): {_last_line(log)}")
    return found[0]


_CONSOLE: Install | None = None


def console() -> Install:
    """The console as installed from its wheel (cached by the wheel's hash), once per process.

    `ARCHON_BENCH_INSTALL=editable` skips the wheel (the smoke test does: no network there)."""
    global _CONSOLE
    if _CONSOLE is not None:
        return _CONSOLE
    if os.environ.get("ARCHON_BENCH_INSTALL") == "editable":
        _CONSOLE = _editable("ARCHON_BENCH_INSTALL=editable")
        return _CONSOLE
    try:
        wheel = build_wheel()
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        _CONSOLE = _editable(f"the wheel could not be built: {exc}")
        return _CONSOLE
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()[:16]
    root = h.out_dir() / "install"
    venv = root / f"venv-{digest}"
    stamp = venv / ".bench-installed"
    if not stamp.exists():
        for old in root.glob("venv-*"):  # one cached environment: the current wheel's
            shutil.rmtree(old, ignore_errors=True)
        log = root / "install.log"
        log.unlink(missing_ok=True)
        print(f"   installing {wheel.name} into {venv} (cached by the wheel's hash)", flush=True)
        if not _new_venv(venv, log) or _run(_pip(venv, wheel), log).returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            _CONSOLE = _editable(f"the wheel's dependencies could not be installed (is the package index "
                                 f"reachable?): {_last_line(log)}")
            return _CONSOLE
        stamp.write_text(wheel.name + "\n")
    _CONSOLE = Install(venv / "bin" / "python", venv / "bin" / "archon-console", "wheel",
                       f"wheel {digest[:8]}, fresh venv", str(wheel.name))
    print(f"   console install: {_CONSOLE.label} ({venv})", flush=True)
    return _CONSOLE


def described() -> str | None:
    """How this run's console was installed (for results.json), None before anything asked."""
    if _CONSOLE is None:
        return None
    return f"{_CONSOLE.label}: {_CONSOLE.note}" if _CONSOLE.note else _CONSOLE.label


def harlequin() -> Install:
    """Harlequin in its own cached environment; kind "missing" with the reason when it cannot be."""
    requirement = os.environ.get("ARCHON_BENCH_HARLEQUIN_REQ", HARLEQUIN)
    digest = hashlib.sha256(f"{requirement} {sys.version}".encode()).hexdigest()[:12]
    root = h.out_dir() / "install"
    root.mkdir(parents=True, exist_ok=True)
    venv = root / f"harlequin-{digest}"
    script = venv / "bin" / "harlequin"
    if not (venv / ".bench-installed").exists():
        log = root / "harlequin.log"
        log.unlink(missing_ok=True)
        print(f"   installing {requirement} into {venv} (cached)", flush=True)
        if not _new_venv(venv, log) or _run(_pip(venv, requirement), log).returncode != 0 or not script.exists():
            shutil.rmtree(venv, ignore_errors=True)
            return Install(Path(sys.executable), None, "missing", "harlequin not installed",
                           f"pip could not install {requirement}: {_last_line(log)}")
        (venv / ".bench-installed").write_text(requirement + "\n")
    return Install(venv / "bin" / "python", script, "wheel", requirement)
