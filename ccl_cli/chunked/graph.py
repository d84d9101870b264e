"""Tasks written straight into a Dask graph: one layer per step, a key per chunk.

dask.delayed inspects every argument of every call (dataclasses, dicts, arrays), client
work for every task; a volume of thousands of chunks has tens of
thousands of tasks, so the steps write their tasks as graph entries (function, arguments),
where an argument that is another task's key stands for its result.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

#: A task's key in the graph.
Key = tuple[Any, ...]


class Layer:
    """The tasks of one step: `add` one per key; `delayed` gives them as dask collections
    that depend on `dependencies` (collections, other Layers among them, whose keys the
    tasks name)."""

    def __init__(self, step: str, dependencies: Iterable[Any] = ()) -> None:
        self.name = f"gccl-{step}-{uuid.uuid4().hex}"
        self.tasks: dict[Any, Any] = {}
        self.dependencies = list(dependencies)

    def add(self, index: tuple[int, ...], function: Callable[..., Any], *args: Any) -> Key:
        """A task computing function(*args) under the key (name, *index)."""
        key = (self.name, *index)
        self.tasks[key] = (function, *args)
        return key

    def graph(self) -> Any:
        from dask.highlevelgraph import HighLevelGraph

        return HighLevelGraph.from_collections(
            self.name, self.tasks, dependencies=self.dependencies
        )

    # A Layer stands for all its tasks where another Layer depends on it.
    def __dask_graph__(self) -> Any:
        return self.graph()

    def __dask_layers__(self) -> tuple[str]:
        return (self.name,)

    def __dask_keys__(self) -> list[Key]:
        return list(self.tasks)

    def delayed(self, keys: list[Key] | None = None) -> list[Any]:
        """One dask Delayed per task of `keys` (all, in the order added, by default), which
        may be tasks of the layers this one depends on."""
        from dask.delayed import Delayed

        graph = self.graph()
        return [Delayed(key, graph, layer=key[0]) for key in (self.tasks if keys is None else keys)]


def persisted_array(layer: Layer, held: dict[Key, Any], chunks: Any) -> Any:
    """The persisted results of `layer`'s tasks (keys (name, i, j, k); `held`: the persisted
    Delayed of each key) as the blocks of a dask array of `chunks` (dtype object), no task
    added: each key stands for its result, held where it was computed."""
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph

    results = {key: held[key].__dask_graph__()[key] for key in layer.tasks}
    graph = HighLevelGraph.from_collections(layer.name, results, dependencies=[])
    return da.Array(graph, layer.name, chunks=chunks, dtype=object)
