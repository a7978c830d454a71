"""Datasette's own (core) pages of Capsem data: the ASGI layer in front of them (lazy
mounting, the per-request secret policy, refusals, security headers and the CSP with the
inline scripts it lets run) and the hooks' helpers for those pages (cells rendered as links,
the database page's session navigation, canned queries, a 4xx for a malformed core
parameter). The plugin's own pages are in `views/`."""
