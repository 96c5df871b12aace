"""The oracle's data is what extract.py makes of the committed seeds, byte for byte (issue 18,
finding 10): the extractor runs in CI, on files the repository holds, so neither it nor the data can
drift unnoticed. The borrowed 1.8.20 objects are frozen data with a stated provenance."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests" / "reference"
# sha256 of data/borrowed_1.8.20.json as copied (tests/reference/README.md, "What is borrowed").
BORROWED_SHA256 = "a6b6949b0e693cc1180f996d9ef618f8f07b97effd21ad686889b1244def41a1"


def test_extract_on_the_committed_seeds_reproduces_the_data(tmp_path):
    seeds = REFERENCE / "seeds"
    assert sorted(p.name for p in seeds.glob("*.txt")) == ["000_723cfc27c7ff5f56.txt", "001_e462658f17ae285d.txt"]
    done = subprocess.run([sys.executable, str(REFERENCE / "extract.py"), str(seeds), str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    made = sorted(p.name for p in tmp_path.glob("*.json"))
    kept = sorted(p.name for p in (REFERENCE / "data").glob("archon_*.json"))
    assert made == kept
    for name in made:
        assert (tmp_path / name).read_bytes() == (REFERENCE / "data" / name).read_bytes(), name


def test_the_borrowed_objects_are_frozen_and_their_provenance_is_stated():
    data = (REFERENCE / "data" / "borrowed_1.8.20.json").read_bytes()
    assert hashlib.sha256(data).hexdigest() == BORROWED_SHA256
    readme = (REFERENCE / "README.md").read_text(encoding="utf-8")
    assert BORROWED_SHA256 in readme


def test_the_seeds_provenance_is_stated():
    readme = (REFERENCE / "seeds" / "README.md").read_text(encoding="utf-8")
    for seed in (REFERENCE / "seeds").glob("*.txt"):
        header = seed.read_text(encoding="utf-8").split("\n", 1)[0]
        assert seed.name in readme and header in readme, (seed.name, header)
