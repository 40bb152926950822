"""``CsvColumns``: how one model's rows become CSV cells and back, for a CSV dataset and a CSV export alike."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pydantic import BaseModel

from spire_core.errors import ConfigError

__all__ = ["CsvColumns", "Row"]

#: One item as a row: its fields by name, JSON values.
Row = dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class CsvColumns:
    """How one model's rows become CSV cells and back.

    ``text`` fields can only hold strings (or ``None``), so their cells are the strings themselves;
    every other field's cell is JSON, which keeps ``1`` and ``"1"`` apart in a field that may hold
    either. An empty cell reads back as ``None``, except in a text field that cannot be ``None``.
    """

    names: tuple[str, ...]
    text: frozenset[str] = frozenset()
    nullable: frozenset[str] = frozenset()

    @classmethod
    def of(cls, model: type[BaseModel]) -> CsvColumns:
        """The columns for ``model``'s fields, typed from its serialization JSON schema."""
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ConfigError(f"a dataset holds pydantic models, not {model!r}")
        names = tuple(model.model_fields)
        try:
            schema = model.model_json_schema(mode="serialization")
        except Exception:  # a type with no JSON schema: every cell as JSON is still exact
            return cls(names, frozenset(), frozenset(names))
        properties: dict[str, Any] = schema.get("properties", {})
        definitions: dict[str, Any] = schema.get("$defs", {})
        text: set[str] = set()
        nullable: set[str] = set()
        for name in names:
            kinds = _json_types(properties.get(name, {}), definitions)
            if kinds is None or "null" in kinds:
                nullable.add(name)
            if kinds is not None and kinds - {"null"} == {"string"}:
                text.add(name)
        return cls(names, frozenset(text), frozenset(nullable))

    def encode(self, row: Row) -> list[str]:
        """The cells for one row, in column order."""
        cells: list[str] = []
        for name in self.names:
            value = row.get(name)
            if value is None:
                cells.append("")
            elif name in self.text and isinstance(value, str):
                cells.append(value)
            else:
                cells.append(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
        return cells

    def decode(self, cells: list[str]) -> Row:
        """The row one record's cells stand for; ``ValueError`` naming the column when a cell is not JSON."""
        row: Row = {}
        for name, cell in zip(self.names, cells, strict=True):
            if cell == "":
                row[name] = None if name in self.nullable else ""
            elif name in self.text:
                row[name] = cell
            else:
                try:
                    row[name] = json.loads(cell)
                except ValueError:
                    raise ValueError(f"column {name!r} holds {cell[:40]!r}, which is not JSON") from None
        return row


def _json_types(schema: dict[str, Any], definitions: dict[str, Any], depth: int = 0) -> set[str] | None:
    """The JSON types a schema allows, or ``None`` when it does not say (``Any``, a deep reference)."""
    if depth > 8:
        return None
    if "$ref" in schema:
        target = definitions.get(str(schema["$ref"]).rsplit("/", 1)[-1])
        return None if target is None else _json_types(target, definitions, depth + 1)
    options = schema.get("anyOf") or schema.get("oneOf") or schema.get("allOf")
    if options:
        found: set[str] = set()
        for option in options:
            kinds = _json_types(option, definitions, depth + 1)
            if kinds is None:
                return None
            found |= kinds
        return found
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {str(kind) for kind in declared}
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else list(schema["enum"])
        return {_json_type_of(value) for value in values}
    return None


def _json_type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return "string"
    return "other"
