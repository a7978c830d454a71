"""Where the Capsem home is, and the plugin's own settings.

Order of precedence for every location: plugin config in metadata.yml, then the environment
variables Capsem itself honours, then Capsem's defaults (spec §1.1).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PLUGIN_NAME = "datasette-capsem"
DEFAULT_MAX_MOUNTED = 32


class ConfigError(Exception):
    """A setting that cannot work; the message names the setting."""


@dataclass(frozen=True)
class Settings:
    capsem_home: Path
    run_dir: Path
    cache_dir: Path
    max_mounted: int = DEFAULT_MAX_MOUNTED
    demo: bool = False
    trusted_actor_header: str | None = None
    index_refresh_seconds: float = 60.0

    @property
    def main_db_candidates(self) -> tuple[Path, ...]:
        """main.db as the scripts find it and as the service finds it (spec §1.1 quirk)."""
        candidates = [self.capsem_home / "sessions" / "main.db"]
        service_path = self.run_dir.parent / "sessions" / "main.db"
        if service_path != candidates[0]:
            candidates.append(service_path)
        return tuple(candidates)


def _expand(value: str | os.PathLike[str]) -> Path:
    return Path(os.path.expanduser(str(value))).absolute()


def _default_cache_root() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "datasette-capsem"


def _is_within(path: Path, parent: Path) -> bool:
    try:
        path.resolve().relative_to(parent.resolve())
    except ValueError:
        return False
    return True


def load_settings(plugin_config: dict[str, Any] | None, environ=os.environ) -> Settings:
    """Build settings from the plugin's metadata config and the environment."""
    config = plugin_config or {}
    home_value = config.get("capsem_home") or environ.get("CAPSEM_HOME") or "~/.capsem"
    capsem_home = _expand(home_value)
    run_value = config.get("run_dir") or environ.get("CAPSEM_RUN_DIR")
    run_dir = _expand(run_value) if run_value else capsem_home / "run"
    cache_root = _expand(
        config.get("cache_dir") or environ.get("DATASETTE_CAPSEM_CACHE") or _default_cache_root()
    )
    # One cache per home so two instances over different homes never share derived files.
    home_key = hashlib.sha256(str(capsem_home).encode()).hexdigest()[:16]
    cache_dir = cache_root / home_key
    if _is_within(cache_dir, capsem_home):
        raise ConfigError(
            f"cache_dir {cache_root} is inside the Capsem home {capsem_home}; "
            "the plugin never writes there"
        )
    if _is_within(cache_dir, run_dir):
        raise ConfigError(f"cache_dir {cache_root} is inside the Capsem run dir {run_dir}")
    max_mounted = config.get("max_mounted_sessions", DEFAULT_MAX_MOUNTED)
    if not isinstance(max_mounted, int) or isinstance(max_mounted, bool) or max_mounted < 1:
        raise ConfigError(f"max_mounted_sessions must be a positive integer, got {max_mounted!r}")
    return Settings(
        capsem_home=capsem_home,
        run_dir=run_dir,
        cache_dir=cache_dir,
        max_mounted=max_mounted,
        demo=_boolean(config.get("demo", False), "demo"),
        trusted_actor_header=config.get("trusted_actor_header") or None,
        index_refresh_seconds=_seconds(config.get("index_refresh_seconds", 60.0)),
    )


def _boolean(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in (
        "true",
        "yes",
        "on",
        "1",
        "false",
        "no",
        "off",
        "0",
    ):
        return value.lower() in ("true", "yes", "on", "1")
    raise ConfigError(f"{name} must be true or false, got {value!r}")


def _seconds(value: Any) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds >= 0:  # also rejects NaN
        raise ConfigError(f"index_refresh_seconds must be a number >= 0, got {value!r}")
    return seconds
