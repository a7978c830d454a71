"""HTTP routes and pages. Each view module exposes `ROUTES`; `views.routes` lists them all."""
