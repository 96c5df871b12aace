"""The demo database: realistic archon data of any size and any historical release.

`generate(path, ...)` is the whole API; see console/demo/writer.py.
"""

from console.demo.writer import DemoSummary, generate

__all__ = ["DemoSummary", "generate"]
