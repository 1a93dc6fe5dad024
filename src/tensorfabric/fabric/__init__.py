"""Lossless RoCE fabric planning: spec, PFC headroom, per-NOS renderers, deployed-config parsers and the linter.

Submodules are imported by name (``tensorfabric.fabric.spec``, ``.headroom``, ``.plan``, ``.lint``, ``.renderers``,
``.parsers``) so that loading one never pays for the others.
"""
