"""Discovery: which sessions exist in a Capsem home, and where their files are."""

from datasette_capsem.catalog.catalog import Catalog, CatalogSnapshot, HomeState
from datasette_capsem.catalog.models import Session

__all__ = ["Catalog", "CatalogSnapshot", "HomeState", "Session"]
