"""Where the Capsem homes are, and the plugin's own settings.

Order of precedence for every location: plugin config in metadata.yml, then the environment
variables Capsem itself honours, then Capsem's defaults (spec §1.1).

One instance serves one home (`capsem_home`, as Capsem itself knows it) or several labelled
homes (`homes`: a list of `{label, path}`; `homes_dir`: a directory whose child directories
are homes, labelled by their folder names). With labels in play every session is addressed by
`<label>--<id>` (see `qualify`); labels are restricted so that the split is unambiguous.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PLUGIN_NAME = "datasette-capsem"
DEFAULT_MAX_MOUNTED = 32


# A label is alphanumeric words joined by single '.', '_' or '-': it never holds the
# separator '--' nor ends in '-', so `<label>--<id>` splits at its first '--', whatever the id.
LABEL_RE = re.compile(r"^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$")
MAX_LABEL_CHARS = 64
SEPARATOR = "--"


class ConfigError(Exception):
    """A setting that cannot work; the message names the setting."""


def label_problem(label: Any) -> str | None:
    """Why `label` cannot name a home, or None when it can."""
    if not isinstance(label, str) or not label:
        return f"a home label must be a non-empty string, got {label!r}"
    if len(label) > MAX_LABEL_CHARS:
        return f"home label {label!r} is longer than {MAX_LABEL_CHARS} characters"
    if not LABEL_RE.match(label):
        return (
            f"home label {label!r} must be letters and digits joined by single '.', '_' or '-' "
            "(no '--', no leading or trailing punctuation)"
        )
    return None


def qualify(label: str, session_id: str) -> str:
    """The address of a session of a labelled home: `<label>--<id>`."""
    return f"{label}{SEPARATOR}{session_id}"


def split_qualified(value: str) -> tuple[str, str] | None:
    """(label, id) of a `<label>--<id>` address, or None when `value` is not one."""
    label, separator, session_id = value.partition(SEPARATOR)
    if not separator or not session_id or label_problem(label):
        return None
    return label, session_id


@dataclass(frozen=True)
class Home:
    """One Capsem home; `label` is "" for the one home of an unlabelled instance."""

    label: str
    capsem_home: Path
    run_dir: Path

    @property
    def main_db_candidates(self) -> tuple[Path, ...]:
        """main.db as the scripts find it and as the service finds it (spec §1.1 quirk)."""
        candidates = [self.capsem_home / "sessions" / "main.db"]
        service_path = self.run_dir.parent / "sessions" / "main.db"
        if service_path != candidates[0]:
            candidates.append(service_path)
        return tuple(candidates)


@dataclass(frozen=True)
class Settings:
    capsem_home: Path
    run_dir: Path
    cache_dir: Path
    max_mounted: int = DEFAULT_MAX_MOUNTED
    demo: bool = False
    trusted_actor_header: str | None = None
    index_refresh_seconds: float = 60.0
    homes: tuple[Home, ...] = ()  # labelled homes named in the config (`homes`)
    homes_dir: Path | None = None  # its child directories are labelled homes too

    @property
    def labelled(self) -> bool:
        """Several homes (or room for them): sessions are addressed `<label>--<id>`."""
        return bool(self.homes) or self.homes_dir is not None

    @property
    def home(self) -> Home:
        """The one home of an unlabelled instance."""
        return Home("", self.capsem_home, self.run_dir)

    @property
    def main_db_candidates(self) -> tuple[Path, ...]:
        return self.home.main_db_candidates


def home_in(directory: Path, label: str) -> Home:
    """A labelled home at `directory` (its run dir inside it, as Capsem's default)."""
    return Home(label, directory, directory / "run")


def scan_homes_dir(homes_dir: Path) -> tuple[list[Home], list[str]]:
    """The homes a `homes_dir` holds now, and why any child directory is left out."""
    homes, problems = [], []
    try:
        children = sorted(os.scandir(homes_dir), key=lambda entry: entry.name)
    except OSError as error:
        return [], [f"homes_dir {homes_dir} cannot be listed: {error.strerror or error}"]
    for child in children:
        if child.name.startswith(".") or not child.is_dir():
            continue
        problem = label_problem(child.name)
        if problem:
            problems.append(f"{child.path} is left out: {problem}")
            continue
        homes.append(home_in(Path(child.path), child.name))
    return homes, problems


def _labelled_homes(value: Any) -> tuple[Home, ...]:
    """The `homes` setting: a list of `{label, path}` (`run_dir` optional), labels unique."""
    if not isinstance(value, list):
        raise ConfigError(f"homes must be a list of {{label, path}}, got {value!r}")
    homes: list[Home] = []
    for entry in value:
        if not isinstance(entry, dict) or not entry.get("path"):
            raise ConfigError(f"each entry of homes needs a label and a path, got {entry!r}")
        label = entry.get("label")
        problem = label_problem(label)
        if problem:
            raise ConfigError(f"homes: {problem}")
        if any(home.label == label for home in homes):
            raise ConfigError(f"homes: the label {label!r} is given twice")
        path = _expand(entry["path"])
        run_dir = _expand(entry["run_dir"]) if entry.get("run_dir") else path / "run"
        homes.append(Home(label, path, run_dir))
    return tuple(homes)


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
    homes = _labelled_homes(config["homes"]) if config.get("homes") is not None else ()
    homes_dir = _expand(config["homes_dir"]) if config.get("homes_dir") else None
    labelled = bool(homes) or homes_dir is not None
    if labelled and (config.get("capsem_home") or config.get("run_dir")):
        raise ConfigError("set either capsem_home (one home) or homes/homes_dir, not both")
    if labelled:
        capsem_home = homes[0].capsem_home if homes else homes_dir
        run_dir = homes[0].run_dir if homes else homes_dir / "run"
        # One cache per set of homes: two instances over different sets share nothing.
        key = json.dumps([[h.label, str(h.capsem_home)] for h in homes] + [str(homes_dir)])
    else:
        home_value = config.get("capsem_home") or environ.get("CAPSEM_HOME") or "~/.capsem"
        capsem_home = _expand(home_value)
        run_value = config.get("run_dir") or environ.get("CAPSEM_RUN_DIR")
        run_dir = _expand(run_value) if run_value else capsem_home / "run"
        key = str(capsem_home)
    cache_root = _expand(
        config.get("cache_dir") or environ.get("DATASETTE_CAPSEM_CACHE") or _default_cache_root()
    )
    # One cache per home so two instances over different homes never share derived files.
    home_key = hashlib.sha256(key.encode()).hexdigest()[:16]
    cache_dir = cache_root / home_key
    for home in homes or (Home("", capsem_home, run_dir),):
        if _is_within(cache_dir, home.capsem_home):
            raise ConfigError(
                f"cache_dir {cache_root} is inside the Capsem home {home.capsem_home}; "
                "the plugin never writes there"
            )
        if _is_within(cache_dir, home.run_dir):
            raise ConfigError(f"cache_dir {cache_root} is inside the Capsem run dir {home.run_dir}")
    if homes_dir is not None and _is_within(cache_dir, homes_dir):
        raise ConfigError(f"cache_dir {cache_root} is inside homes_dir {homes_dir}")
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
        homes=homes,
        homes_dir=homes_dir,
    )


def home_problem(settings: Settings | Home) -> str | None:
    """Why `settings.capsem_home` is not a Capsem home, or None when it is one: a Capsem home
    holds `sessions/` (main.db, pre-2026 session dirs) or a run dir (`run/`)."""
    home = settings.capsem_home
    if not home.exists():
        return "does not exist"
    if not home.is_dir():
        return "is not a directory"
    if not ((home / "sessions").is_dir() or settings.run_dir.is_dir()):
        return "is not a Capsem home (it has neither sessions/ nor a run dir)"
    return None


# Plugin settings that ask for a Capsem home to be served (`datasette capsem serve`/`demo` write
# them too). Any other setting (`trusted_actor_header`, `view_secrets`, ...) only says how.
HOME_SETTINGS = ("capsem_home", "run_dir", "homes", "homes_dir", "demo")


def serves_capsem(
    plugin_config: dict[str, Any] | None, own_databases: bool, environ=os.environ
) -> bool:
    """Whether an instance serves Capsem data (the plugin's list at `/`, `main`, `index` and
    the ledgers mounted, its headers) or is a guest in someone else's Datasette, where the
    plugin changes nothing but answering `/-/capsem` with how to point it at a home.

    It serves when asked to: a home setting in its config (with databases of the user's own
    beside it: a mixed instance), or `datasette serve` with no database arguments and
    `$CAPSEM_HOME` set or a Capsem home at `~/.capsem`. `datasette serve other.db` with nothing
    configured leaves Datasette as it is, whatever homes exist on the machine."""
    config = plugin_config or {}
    if any(config.get(key) for key in HOME_SETTINGS):
        return True
    if own_databases:
        return False
    if environ.get("CAPSEM_HOME"):
        return True
    return home_problem(load_settings(config, environ)) is None


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
