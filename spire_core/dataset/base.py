"""``Dataset[T]``: where handlers put what they extract, validated by pydantic on push.

Two layers: a ``Dataset`` validates and converts items of one pydantic model; a small ``Storage``
underneath appends and reads back plain rows (memory, JSON Lines, CSV, SQLite).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, Self, TypeVar, runtime_checkable

from pydantic import BaseModel, TypeAdapter, ValidationError

from spire_core.dataset.export import export_rows
from spire_core.errors import ConfigError, InvalidItem

__all__ = ["Checked", "Dataset", "ExportFormat", "Sink", "Storage", "StoredDataset"]

T = TypeVar("T", bound=BaseModel)

ExportFormat = Literal["jsonl", "json", "csv", "parquet"]
Row = dict[str, Any]


@runtime_checkable
class Sink(Protocol[T]):
    """What a successful page commits items of one model to: a ``Dataset``, or a consumer in the
    crawl's process that stores nothing itself (``Crawler(sinks={Verdict: keeper})``).

    A handler stages items on a sink as on a dataset (``ctx.stage(sink, items)``); they are pushed
    when the handler succeeds, with its links, in the crawl's process (with ``processes=N`` too: the
    items cross, and the crawl's process pushes them to its sink for their model). What a sink's
    ``push`` returns is counted in ``stats.items``: a sink that stores nothing returns 0.
    """

    model: type[T]

    def validate(self, items: T | dict[str, Any] | Iterable[T | dict[str, Any]]) -> list[T]:
        """Items as validated models, without taking them (a handler's push validates at once)."""
        ...

    async def push(self, items: T | dict[str, Any] | Iterable[T | dict[str, Any]]) -> int:
        """Take one item or many; return how many were stored."""
        ...


@runtime_checkable
class Dataset(Sink[T], Protocol[T]):
    """Items of one pydantic model: push them, read them back, export them.

    books: Dataset[Book] = JsonlDataset(Book, "books.jsonl")
    await books.push(Book(title="Dune", price=9.5))
    async for book in books: ...
    """

    def __aiter__(self) -> AsyncIterator[T]: ...

    async def export(self, path: str | Path, format: ExportFormat = "jsonl") -> int:
        """Write every item to ``path`` in ``format``; return how many."""
        ...

    async def aclose(self) -> None: ...


class Storage(Protocol):
    """Rows appended and read back, in order: the small contract under a ``StoredDataset``."""

    async def append(self, rows: list[Row]) -> None: ...

    def rows(self) -> AsyncIterator[Row]: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Checked(Protocol):
    """A dataset or storage that can tell, before anything is written, that nothing ever can be.

    An optional ability: a crawl calls ``check()`` on each of its datasets that has it, once, before
    its first request, so a read-only output folder stops the crawl in one line instead of failing
    every page; a ``StoredDataset`` asks its storage the same way (memory has nothing to check).
    """

    async def check(self) -> None:
        """Raise ``DatasetError`` when nothing can ever be written (a read-only folder, a directory)."""
        ...


def invalid_item(model: type[BaseModel], error: ValidationError, *, batch: bool = False) -> InvalidItem:
    """pydantic's ``ValidationError`` as spire's ``InvalidItem``, one line per field problem.

    Build a model yourself (``Book(title=None)``) and pydantic raises before spire sees it; pass the
    fields as a dict to ``push`` to get this error instead.
    """
    problems = []
    for detail in error.errors():
        loc = list(detail["loc"])
        if batch and loc and isinstance(loc[0], int):
            where = f"item {loc[0]}: " + (".".join(map(str, loc[1:])) or "(item)")
        else:
            where = ".".join(map(str, loc[1:] if loc and isinstance(loc[0], int) else loc)) or "(item)"
        problems.append(f"  {where}: {detail['msg']} (got {detail.get('input')!r})")
    count = error.error_count()
    message = f"invalid {model.__name__}: {count} field problem{'s' if count != 1 else ''}\n" + "\n".join(problems)
    return InvalidItem(message, model=model.__name__, errors=[dict(detail) for detail in error.errors()])


class StoredDataset(Generic[T]):
    """A ``Dataset`` over any ``Storage``: validation and conversion live here, once."""

    def __init__(self, model: type[T], storage: Storage) -> None:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ConfigError(f"a dataset holds pydantic models, not {model!r}")
        self.model = model
        self.storage = storage
        self._many: TypeAdapter[list[T]] = TypeAdapter(list[model])  # type: ignore[valid-type]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model.__name__})"

    def validate(self, items: T | dict[str, Any] | Iterable[T | dict[str, Any]]) -> list[T]:
        """Items as validated models; raises ``InvalidItem`` (with pydantic's field messages) on a bad one."""
        if isinstance(items, BaseModel | dict):
            items = [items]
        batch = list(items)
        if all(type(item) is self.model for item in batch):
            return batch  # type: ignore[return-value]  # already validated on construction
        try:
            return self._many.validate_python(
                [item.model_dump() if isinstance(item, BaseModel) else item for item in batch]
            )
        except ValidationError as exc:
            raise invalid_item(self.model, exc, batch=len(batch) > 1) from None

    async def push(self, items: T | dict[str, Any] | Iterable[T | dict[str, Any]]) -> int:
        batch = self.validate(items)
        if batch:
            await self.storage.append([item.model_dump(mode="json") for item in batch])
        return len(batch)

    async def __aiter__(self) -> AsyncIterator[T]:
        async for row in self.storage.rows():
            yield self.model.model_validate(row)

    async def items(self) -> list[T]:
        """Every item, in order."""
        return [item async for item in self]

    async def export(self, path: str | Path, format: ExportFormat = "jsonl") -> int:
        return await export_rows(self.storage.rows(), Path(path), format, model=self.model)

    async def check(self) -> None:
        """Raise ``DatasetError`` when no item can ever be stored (see ``Checked``)."""
        if isinstance(self.storage, Checked):
            await self.storage.check()

    async def aclose(self) -> None:
        await self.storage.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
