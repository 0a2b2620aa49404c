"""Installed versions of the distributions a result depends on."""

from __future__ import annotations

import importlib.metadata


def package_versions(packages) -> dict:
    """``{distribution: installed version}`` of each name in ``packages`` (None when not
    installed)."""
    out = {}
    for pkg in packages:
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    return out
