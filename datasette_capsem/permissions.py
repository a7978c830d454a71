"""Every permission question the plugin asks goes through here.

Datasette 0.65 answers with `permission_allowed`; 1.0 with `allowed(action=, resource=)`.
Keeping the call in one function means a move to 1.0 changes only this file.
"""

from __future__ import annotations

from typing import Any

from datasette.utils import actor_matches_allow

from datasette_capsem.config import PLUGIN_NAME

VIEW_SECRETS = "capsem-view-secrets"


async def allowed(
    datasette, actor: dict | None, action: str, resource: Any = None, default: bool = True
) -> bool:
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
