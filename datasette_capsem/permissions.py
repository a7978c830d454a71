"""Every permission question the plugin asks goes through here, and so does every other call
whose form differs between the two Datasette lines the plugin runs on.

Datasette 0.65 answers `permission_allowed(actor, action, resource, default)` and asks plugins
through the `permission_allowed` hook; 1.0 answers `allowed(action=, resource=, actor=)` over
registered actions (`register_actions`) and asks plugins for SQL rules
(`permission_resources_sql`). The hooks in `__init__.py` implement both; each line calls only
its own (pluggy leaves a hook implementation without a specification uncalled).
"""

from __future__ import annotations

from typing import Any

from datasette.utils import actor_matches_allow

from datasette_capsem.config import PLUGIN_NAME

try:  # Datasette 1.0: resources and registered actions
    from datasette.permissions import Action, PermissionSQL
    from datasette.resources import DatabaseResource
except ImportError:  # Datasette 0.65
    Action = PermissionSQL = DatabaseResource = None

DATASETTE_1 = DatabaseResource is not None
VIEW_SECRETS = "capsem-view-secrets"
VIEW_SECRETS_DESCRIPTION = "View Capsem credentials unmasked (headers, query strings, bodies)"


async def allowed(
    datasette, actor: dict | None, action: str, resource: Any = None, default: bool = True
) -> bool:
    """`action` allowed to `actor`; `resource` a database name or None (instance-wide).
    On 1.0 an action's default is its own (view-instance and view-database allow, the
    plugin's VIEW_SECRETS denies unless `view_secrets` allows), as `default` says on 0.65."""
    if DATASETTE_1:
        target = DatabaseResource(resource) if isinstance(resource, str) else None
        return await datasette.allowed(action=action, resource=target, actor=actor)
    return await datasette.permission_allowed(actor, action, resource=resource, default=default)


async def can_view_instance(datasette, actor: dict | None) -> bool:
    return await allowed(datasette, actor, "view-instance")


async def can_view_database(datasette, actor: dict | None, database: str) -> bool:
    return await can_view_instance(datasette, actor) and await allowed(
        datasette, actor, "view-database", database
    )


async def can_view_secrets(datasette, actor: dict | None) -> bool:
    return await allowed(datasette, actor, VIEW_SECRETS, default=False)


def view_secrets_from_config(datasette, actor: dict | None) -> bool:
    """`view_secrets` in plugin config is a Datasette allow block; absent means nobody."""
    allow = (datasette.plugin_config(PLUGIN_NAME) or {}).get("view_secrets", False)
    return bool(actor_matches_allow(actor, allow))


def actions() -> list:
    """1.0's `register_actions`: the plugin's one action, instance-wide."""
    return [Action(name=VIEW_SECRETS, description=VIEW_SECRETS_DESCRIPTION)]


def view_secrets_sql(datasette, actor: dict | None):
    """1.0's `permission_resources_sql` for VIEW_SECRETS: an allow rule for an actor that
    `view_secrets` names, nothing otherwise (so the action's default, deny, stands)."""
    if view_secrets_from_config(datasette, actor):
        return PermissionSQL.allow(reason="datasette-capsem view_secrets")
    return None


async def instance_metadata(datasette) -> dict[str, Any]:
    """The instance's metadata (title, description, ...): `metadata()` on 0.65,
    `get_instance_metadata()` on 1.0."""
    if hasattr(datasette, "get_instance_metadata"):
        return await datasette.get_instance_metadata() or {}
    return datasette.metadata() or {}


def jinja_environment(datasette):
    """The instance's Jinja environment: `jinja_env` on 0.65, `get_jinja_environment()` on 1.0."""
    if hasattr(datasette, "get_jinja_environment"):
        return datasette.get_jinja_environment()
    return datasette.jinja_env
