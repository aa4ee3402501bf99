"""Plugins never reach into each other in a circle: the TorchTune helper does not import the Torch plugin."""

from __future__ import annotations

import grimp


def test_torchtune_does_not_import_torch() -> None:
    graph = grimp.build_graph("kubetrain")
    chain = graph.find_shortest_chain(
        importer="kubetrain.compiler.plugins.torchtune", imported="kubetrain.compiler.plugins.torch"
    )
    assert chain is None, f"import cycle: {' -> '.join(chain or ())}"
