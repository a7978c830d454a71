"""Shared pytest fixtures. Add your own below; keep each one small."""

from __future__ import annotations

from pathlib import Path

import pytest

from datasette_capsem.generate import GenerateOptions, generate_home
from tests.browser import browser  # noqa: F401  (a session-wide headless Chromium)


@pytest.fixture(scope="session")
def generated_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The default generated home, built once per test run: (path, manifest)."""
    path = tmp_path_factory.mktemp("capsem-home") / "home"
    manifest = generate_home(path, GenerateOptions())
    return path, manifest


@pytest.fixture(scope="session")
def capsem_home(generated_home: tuple[Path, dict]) -> Path:
    """Path of the default generated Capsem home (read it, do not modify it)."""
    return generated_home[0]


@pytest.fixture(scope="session")
def manifest(generated_home: tuple[Path, dict]) -> dict:
    """manifest.json of ``capsem_home``: what was injected where."""
    return generated_home[1]
