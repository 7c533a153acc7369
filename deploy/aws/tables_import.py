"""Writes what CloudFormation needs to adopt tables that exist already (made by `socialgraph
create-tables`, or by an earlier stack that was deleted: they are retained) into the stack of
``socialgraph.yaml``, instead of failing to create them again:

- ``tables.json``: a template with the five tables of ``socialgraph.yaml`` alone, exactly as that
  template declares them (an import change set may hold nothing but the resources it imports);
- ``resources-to-import.json``: each table's logical ID and name, for ``--resources-to-import``.

    python3 deploy/aws/tables_import.py --table-prefix prod_ --out import/

then ``aws cloudformation create-change-set --change-set-type IMPORT`` with both, and a normal
update with the whole template (docs/deploying.md, "Tables that exist already"). Needs PyYAML only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # types-PyYAML is not a dependency

TEMPLATE = Path(__file__).resolve().with_name("socialgraph.yaml")
TABLE = "AWS::DynamoDB::Table"


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # untyped base
    """YAML with CloudFormation's short forms (``!Ref``, ``!Sub``...) read as their long forms."""


def _intrinsic(loader: _Loader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        return {"Fn::GetAtt": value.split(".", 1)}
    return {f"Fn::{suffix}": value}


_Loader.add_multi_constructor("!", _intrinsic)


def _referenced(node: Any, kind: str) -> set[str]:
    """The names of the parameters (``Ref``) or conditions (``Fn::If``) a part of the template uses."""
    found: set[str] = set()
    if isinstance(node, dict):
        if kind == "Ref" and isinstance(node.get("Ref"), str) and not node["Ref"].startswith("AWS::"):
            found.add(node["Ref"])
        if kind == "Sub" and isinstance(node.get("Fn::Sub"), str):
            found |= {name for name in _sub_names(node["Fn::Sub"]) if "." not in name and not name.startswith("AWS::")}
        if kind == "If" and isinstance(node.get("Fn::If"), list):
            found.add(node["Fn::If"][0])
        for value in node.values():
            found |= _referenced(value, kind)
    elif isinstance(node, list):
        for value in node:
            found |= _referenced(value, kind)
    return found


def _sub_names(text: str) -> list[str]:
    return [part.split("}", 1)[0] for part in text.split("${")[1:]]


def tables_template(template: dict[str, Any]) -> dict[str, Any]:
    """The tables of ``template`` with the parameters and conditions they use, and nothing else."""
    tables = {name: res for name, res in template["Resources"].items() if res["Type"] == TABLE}
    conditions = {name: template["Conditions"][name] for name in sorted(_referenced(tables, "If"))}
    used = _referenced(tables, "Ref") | _referenced(tables, "Sub") | _referenced(conditions, "Ref")
    return {
        "AWSTemplateFormatVersion": template["AWSTemplateFormatVersion"],
        "Description": "socialgraph: the tables alone, to import those that exist (deploy/aws/tables_import.py)",
        "Parameters": {name: template["Parameters"][name] for name in sorted(used)},
        "Conditions": conditions,
        "Resources": tables,
    }


def resources_to_import(template: dict[str, Any], table_prefix: str) -> list[dict[str, Any]]:
    """``--resources-to-import``: each table by its name (the TableName with the prefix given)."""
    found = []
    for name, resource in template["Resources"].items():
        if resource["Type"] != TABLE:
            continue
        table_name = resource["Properties"]["TableName"]["Fn::Sub"].replace("${TablePrefix}", table_prefix)
        found.append(
            {"ResourceType": TABLE, "LogicalResourceId": name, "ResourceIdentifier": {"TableName": table_name}}
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--table-prefix", required=True, help="the stack's TablePrefix (SG_TABLE_PREFIX), e.g. prod_")
    parser.add_argument(
        "--out", type=Path, required=True, help="folder to write tables.json and resources-to-import.json to"
    )
    args = parser.parse_args(argv)
    template = yaml.load(TEMPLATE.read_text(), Loader=_Loader)  # noqa: S506 - a SafeLoader
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tables.json").write_text(json.dumps(tables_template(template), indent=2) + "\n")
    imports = resources_to_import(template, args.table_prefix)
    (args.out / "resources-to-import.json").write_text(json.dumps(imports, indent=2) + "\n")
    print(f"wrote {args.out / 'tables.json'} and {args.out / 'resources-to-import.json'}:", file=sys.stderr)
    for entry in imports:
        print(f"  {entry['LogicalResourceId']} <- {entry['ResourceIdentifier']['TableName']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
