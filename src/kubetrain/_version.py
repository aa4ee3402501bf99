"""The release, in one place (the package, the CLI's --version, the manifests and the chart carry it)."""

__version__ = "0.1.0"
