"""The README's install story works (issue 21 item 1): a wheel built from what a clone holds installs
into a fresh virtual environment, and the `archon-console` it puts there runs from anywhere, on its
own files, with everything the package needs (modules and stylesheets); installing again upgrades it
and uninstalling removes it.

Offline by construction: the wheel is built with the backend the test tools bring (`setuptools`,
`wheel` in pyproject.toml's `test` extra, `--no-build-isolation --no-index`), and the fresh
environment reads the dependencies from this one's site-packages through a `.pth` line instead of
downloading them (the README's wheelhouse does the download where there is network).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import console

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
TIMEOUT = 300  # a loaded 2-core machine; a passing run takes seconds


def _run(argv, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "ARCHON_", "PIP_"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT, **kwargs)


def _clone(into: Path) -> Path:
    """What a clone holds for the package: the sources and the metadata pyproject.toml names (no
    .venv, no egg-info, no __pycache__ of this checkout)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "__snapshots__")
    for name in ("console", "widgets"):
        shutil.copytree(ROOT / name, into / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, into / name)
    return into


@pytest.mark.slow
def test_a_wheel_from_the_clone_installs_runs_upgrades_and_uninstalls(tmp_path):
    src = _clone(tmp_path / "archon-console")
    wheels = tmp_path / "wheelhouse"
    built = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                  "-w", wheels, src], cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    [wheel] = wheels.glob("archon_console-*.whl")
    assert wheel.name.startswith(f"archon_console-{console.__version__}-py3-none-any")

    # Every module and stylesheet of the package is in the wheel (package-data included).
    wanted = {p.relative_to(src).as_posix() for top in ("console", "widgets") for p in (src / top).rglob("*")
              if p.suffix in {".py", ".tcss"}}
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
        entry = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert sorted(wanted - names) == []
    assert "archon-console = console.cli.cli:main" in entry
    assert {"textual", "sqlite-utils", "humanize", "pyperclip"} <= {
        re.split(r"[ <>=!;~(\[]", line.split(":", 1)[1].strip())[0].lower()
        for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line}

    venv = tmp_path / "venv"
    assert _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp_path).returncode == 0
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python]
    installed = _run([*pip, "install", "--no-deps", "--no-index", wheel], cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=tmp_path).stdout.strip())
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    program = venv / "bin" / "archon-console"
    version = _run([program, "--version"], cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == f"archon-console {console.__version__}", version
    where = _run([python, "-c", "import console, widgets; print(console.__file__); print(widgets.__file__)"],
                 cwd=tmp_path).stdout.split()
    assert all(Path(w).is_relative_to(site) for w in where), where  # its own copy, not the checkout's
    db = tmp_path / "demo.db"
    assert _run([program, "demo", db, "--requests", "20"], cwd=tmp_path).returncode == 0
    listed = _run([program, "--db", db, "--json", "approvals", "list", "--status", "all"], cwd=tmp_path)
    assert listed.returncode == 0 and '"id": "apr-' in listed.stdout, listed.stderr
    assert _run([program, "--db", db, "doctor"], cwd=tmp_path).returncode in (0, 1)

    again = _run([*pip, "install", "--no-deps", "--no-index", "--force-reinstall", wheel], cwd=tmp_path)
    assert again.returncode == 0 and "Successfully installed" in again.stdout, again.stderr
    assert _run([program, "--version"], cwd=tmp_path).returncode == 0

    removed = _run([*pip, "uninstall", "--yes", "archon-console"], cwd=tmp_path)
    assert removed.returncode == 0, removed.stderr
    assert not program.exists() and not (site / "console").exists()


def test_the_readme_says_how_to_install_upgrade_and_uninstall():
    """The quick start stays two commands; the install section gives each way and its upgrade and
    uninstall, and the fleet host's PATH (the commands are the ones the test above runs offline)."""
    quick = re.search(r"## Quick start\n\n```\n(.*?)```", README, re.S)
    assert quick and [line.split("#")[0].strip() for line in quick.group(1).splitlines()] == ["make demo", "make test"]
    install = README[README.index("## Install\n"):README.index("## Using it on a real archon database")]
    for phrase in ("pipx install .", "pipx install --force .", "pipx uninstall archon-console",
                   "python3 -m venv", "bin/pip install .", "python3 -m pip wheel -w wheelhouse .",
                   "--no-index --find-links", "--force-reinstall", "make install", "make clean",
                   "command -v archon-console", "remote =", "archon-console --version"):
        assert phrase in install, phrase
