"""A generator of realistic Capsem homes: the data every test, demo and benchmark runs on.

``generate_home(path, GenerateOptions(...))`` writes ``sessions/main.db``, the ledgers of every
layout and schema era, ``run/persistent_registry.json`` and ``manifest.json`` (the ground truth
of what was injected where; see ``manifest.py``). The same seed gives byte-identical files.
"""

from __future__ import annotations

from datasette_capsem.generate.home import GenerateError, generate_home, is_capsem_home
from datasette_capsem.generate.manifest import load_manifest
from datasette_capsem.generate.options import GenerateOptions

__all__ = ["GenerateError", "GenerateOptions", "generate_home", "is_capsem_home", "load_manifest"]
