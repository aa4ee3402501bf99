"""Where the charting library comes from: plotly.js as the ``plotly`` wheel (the ``ui`` extra) ships it.

The file is served from the installed package, so nothing of it lives in this repository, and the pages load it
only once a TrainJob has metrics to draw (a list page never does).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def plotly_js() -> Path | None:
    """The minified plotly.js of the installed ``plotly`` package, or None when it is not installed."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / "package_data" / "plotly.min.js"
        if path.is_file():
            return path
    return None
