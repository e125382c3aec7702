"""site-config/README.md's key tables are the schema's keys: every key `slurmx config schema` knows has a row in its
section's table, and every row names a key the schema knows (a renamed or new key cannot go undocumented)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from slurmx.daemon.site_check import site_json_schema

README = Path(__file__).resolve().parents[2] / "site-config" / "README.md"
_HEADING = re.compile(r"^### `([a-z_.]+)`\s*$", re.MULTILINE)
_ROW_KEYS = re.compile(r"`([a-z_]+)`")


def _object(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """The object schema behind a property (through $ref, anyOf and additionalProperties)."""
    for candidate in (node, *node.get("anyOf", ()), *node.get("allOf", ())):
        if "$ref" in candidate:
            return _object(schema, schema["$defs"][candidate["$ref"].rsplit("/", 1)[1]])
    if "additionalProperties" in node and isinstance(node["additionalProperties"], dict) \
            and "properties" not in node:
        return _object(schema, node["additionalProperties"])
    return node


def schema_keys() -> dict[str, set[str]]:
    """Section (`daemon`, `profile.sampling`, ...) -> its keys as a site file spells them."""
    schema = site_json_schema()
    out: dict[str, set[str]] = {}
    for section, node in schema["properties"].items():
        props = _object(schema, node).get("properties", {})
        out[section] = set(props)
        for key, sub in props.items():
            nested = _object(schema, sub).get("properties")
            if nested:
                out[f"{section}.{key}"] = set(nested)
    return out


def readme_keys() -> dict[str, set[str]]:
    """Section -> keys named in the first cell of its table rows (`a`, `b` rows name several)."""
    text = README.read_text()
    heads = list(_HEADING.finditer(text))
    chunks: dict[str, str] = {}
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        chunks[head.group(1)] = text[head.end():after.start() if after else text.index("\n## ", head.end())]
    for section in list(chunks):  # a sub-table introduced by a line "`section.key`:"
        for sub in re.finditer(rf"^`({re.escape(section)}\.[a-z_]+)`:\s*$", chunks[section], re.MULTILINE):
            chunks[sub.group(1)] = chunks[section][sub.end():]
            chunks[section] = chunks[section][:sub.start()]
    out: dict[str, set[str]] = {}
    for section, chunk in chunks.items():
        rows = [line for line in chunk.splitlines() if line.startswith("| `")]
        out[section] = {key for row in rows for key in _ROW_KEYS.findall(row.split("|")[1])}
    return out


def test_every_schema_key_has_a_row_and_every_row_a_key() -> None:
    schema, readme = schema_keys(), readme_keys()
    sections = {section for section in schema if not section.startswith("classes.")}
    assert sections <= set(readme), f"site-config/README.md lacks sections {sorted(sections - set(readme))}"
    for section, keys in schema.items():
        documented = readme.get(section, set())
        if section.split(".")[0] == "classes":  # te and be, each {qos: ...}, described in prose
            assert all(f"`{key}`" in README.read_text() or f"{{{key}:" in README.read_text() for key in keys)
            continue
        assert keys <= documented, f"site-config/README.md, `{section}`: no row for {sorted(keys - documented)}"
        assert documented <= keys, f"site-config/README.md, `{section}`: rows for unknown {sorted(documented - keys)}"
