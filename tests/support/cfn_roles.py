"""What the CloudFormation template's IAM roles allow on the project's tables, and which streams
its Lambda event source mappings read, as sets the tests compare with what the components do.

A grant is (IAM action, table, resource kind): the table by its short name (the ``Metadata``
``socialgraph:table`` of its ``AWS::DynamoDB::Table`` resource), the kind by the ARN the statement
names: ``!GetAtt T.Arn`` the table, ``!GetAtt T.StreamArn`` or ``!Sub "${T.Arn}/stream/*"`` its
stream, ``!Sub "${T.Arn}/index/*"`` its indexes (``"${T.Arn}/*"`` both). Anything else that could
allow a DynamoDB action (a wildcard action or resource, ``NotAction``, a managed DynamoDB policy, a
resource this reader does not know) is refused by name rather than guessed at: a least-privilege
check that skipped what it cannot read would pass the broadest policy of all.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cfnlint.decode

__all__ = [
    "Grant",
    "TemplateShapeError",
    "load_template",
    "referenced_id",
    "role_grants",
    "stream_triggers",
    "table_names",
]

TABLE_TYPES = {"AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"}
SUB_ARN = re.compile(r"^\$\{(?P<table>[A-Za-z0-9]+)\.(?P<attribute>Arn|StreamArn)\}(?P<suffix>.*)$")
SUFFIX_KINDS = {
    "": ("table",),
    "/stream/*": ("stream",),
    "/index/*": ("index",),
    "/*": ("index", "stream"),
}


class TemplateShapeError(AssertionError):
    """The template says something about DynamoDB access that this reader does not understand."""


@dataclass(frozen=True, order=True)
class Grant:
    action: str
    """``dynamodb:GetItem``..."""
    table: str
    """The table's short name (``followers``...)."""
    resource: str
    """``table``, ``index`` or ``stream``: the ARN the action needs."""

    def __str__(self) -> str:
        where = {"table": "", "index": " (its indexes)", "stream": " (its stream)"}[self.resource]
        return f"{self.action} on {self.table}{where}"


def load_template(path: Path) -> dict[str, Any]:
    """The template as cfn-lint reads it: short forms (``!Ref``, ``!GetAtt X.Y``...) in their long forms."""
    decoded, problems = cfnlint.decode.decode(str(path))
    assert not problems, problems
    return dict(decoded)


def _resources(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    resources: dict[str, dict[str, Any]] = template.get("Resources", {})
    return resources


def table_names(template: dict[str, Any]) -> dict[str, str]:
    """Logical ID -> short name of every table resource marked ``socialgraph:table``."""
    return {
        logical_id: str(resource["Metadata"]["socialgraph:table"])
        for logical_id, resource in _resources(template).items()
        if resource.get("Type") in TABLE_TYPES and "socialgraph:table" in (resource.get("Metadata") or {})
    }


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _branches(value: Any) -> list[Any]:
    """A list entry as the template may deploy it: both branches of an ``!If`` (either may be the
    one deployed, so both count as granted), none for ``!Ref AWS::NoValue``."""
    if isinstance(value, dict) and set(value) == {"Fn::If"}:
        _, then, otherwise = value["Fn::If"]
        return [*_branches(then), *_branches(otherwise)]
    if value == {"Ref": "AWS::NoValue"}:
        return []
    return [value]


def _touches_dynamodb(action: str) -> bool:
    """``dynamodb:X``, or a pattern that matches some DynamoDB action (``*``, ``dynamo*:*``, ``*:Scan``)."""
    lowered = action.lower()
    service = lowered.partition(":")[0]
    if lowered.startswith("dynamodb:") or fnmatch.fnmatchcase("dynamodb:getitem", lowered):
        return True
    return ("*" in lowered or "?" in lowered) and fnmatch.fnmatchcase("dynamodb", service or "*")


def _resource_grants(resource: Any, tables: dict[str, str], where: str) -> list[tuple[str, str]]:
    """(short table name, kind) pairs one ``Resource`` entry names."""
    if isinstance(resource, dict) and "Fn::GetAtt" in resource:
        target, attribute = resource["Fn::GetAtt"]
        kind = {"Arn": "table", "StreamArn": "stream"}.get(attribute)
        if target in tables and kind is not None:
            return [(tables[target], kind)]
    if isinstance(resource, dict) and "Fn::Sub" in resource:
        text = _as_list(resource["Fn::Sub"])[0]
        found = SUB_ARN.match(text) if isinstance(text, str) else None
        if found is not None and found["table"] in tables:
            if found["attribute"] == "StreamArn" and found["suffix"] == "":
                return [(tables[found["table"]], "stream")]
            if found["attribute"] == "Arn":
                suffix = found["suffix"]
                if suffix.startswith("/index/") and suffix != "/index/*":
                    suffix = "/index/*"  # one named index: still the table's indexes
                kinds = SUFFIX_KINDS.get(suffix)
                if kinds is not None:
                    return [(tables[found["table"]], kind) for kind in kinds]
    raise TemplateShapeError(
        f"{where}: a DynamoDB resource this check cannot read: {resource!r} (name a table of the"
        " template: !GetAtt T.Arn, !GetAtt T.StreamArn, or !Sub '${T.Arn}/index/*' or '${T.Arn}/stream/*')"
    )


def _statement_grants(statement: dict[str, Any], tables: dict[str, str], where: str) -> set[Grant]:
    if "NotAction" in statement or "NotResource" in statement:
        raise TemplateShapeError(f"{where}: NotAction/NotResource cannot be checked for least privilege")
    actions = _as_list(statement.get("Action", []))
    computed = [a for a in actions if not isinstance(a, str)]
    if computed:
        raise TemplateShapeError(f"{where}: actions computed by intrinsic functions cannot be checked: {computed!r}")
    dynamodb = [a for a in actions if _touches_dynamodb(a)]
    if not dynamodb:
        return set()
    if statement.get("Effect") != "Allow":
        raise TemplateShapeError(f"{where}: a {statement.get('Effect')} statement on DynamoDB actions is not checked")
    wild = [a for a in dynamodb if "*" in a or "?" in a or not a.lower().startswith("dynamodb:")]
    if wild:
        raise TemplateShapeError(f"{where}: wildcard actions {wild}: name each action")
    names = [
        (table, kind)
        for r in _as_list(statement.get("Resource", []))
        for table, kind in _resource_grants(r, tables, where)
    ]
    return {Grant(f"dynamodb:{a.split(':', 1)[1]}", table, kind) for a in dynamodb for table, kind in names}


def _documents(template: dict[str, Any], role_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(where, policy document) of the role's inline policies and of the policy resources attached to it."""
    resources = _resources(template)
    role = resources.get(role_id)
    if role is None or role.get("Type") != "AWS::IAM::Role":
        raise TemplateShapeError(f"no AWS::IAM::Role {role_id} in the template")
    properties = role.get("Properties", {})
    for arn in properties.get("ManagedPolicyArns", []):
        if "dynamodb" in repr(arn).lower():
            raise TemplateShapeError(f"{role_id}: managed policy {arn!r} grants DynamoDB beyond the tables used")
    documents = [
        (f"{role_id} policy {p.get('PolicyName', '?')}", p.get("PolicyDocument", {}))
        for entry in properties.get("Policies", [])
        for p in _branches(entry)
    ]
    for logical_id, resource in resources.items():
        if resource.get("Type") in {"AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"}:
            attached = resource.get("Properties", {}).get("Roles", [])
            if {"Ref": role_id} in attached:
                documents.append((logical_id, resource["Properties"].get("PolicyDocument", {})))
    return documents


def role_grants(template: dict[str, Any], role_id: str) -> set[Grant]:
    """Every (action, table, resource kind) the role allows."""
    tables = table_names(template)
    grants: set[Grant] = set()
    for where, document in _documents(template, role_id):
        statements = [b for entry in _as_list(document.get("Statement", [])) for b in _branches(entry)]
        for n, statement in enumerate(statements):
            grants |= _statement_grants(statement, tables, f"{where} statement {n + 1}")
    return grants


def referenced_id(reference: Any) -> str | None:
    """The resource a ``!Ref X`` or ``!GetAtt X.Arn`` names."""
    if isinstance(reference, dict) and "Ref" in reference:
        return str(reference["Ref"])
    if isinstance(reference, dict) and "Fn::GetAtt" in reference:
        return str(reference["Fn::GetAtt"][0])
    return None


def stream_triggers(template: dict[str, Any]) -> dict[str, set[str]]:
    """Role logical ID -> short names of the tables whose streams an event source mapping reads for
    a function running with that role (the mapping reads the stream with the function's role)."""
    resources = _resources(template)
    tables = table_names(template)
    found: dict[str, set[str]] = {}
    for logical_id, resource in resources.items():
        if resource.get("Type") != "AWS::Lambda::EventSourceMapping":
            continue
        properties = resource.get("Properties", {})
        source = properties.get("EventSourceArn")
        function_id = referenced_id(properties.get("FunctionName"))
        function = resources.get(function_id or "", {})
        role_id = referenced_id(function.get("Properties", {}).get("Role"))
        is_stream = isinstance(source, dict) and source.get("Fn::GetAtt", [None, None])[1] == "StreamArn"
        if not is_stream or source["Fn::GetAtt"][0] not in tables or role_id is None:
            raise TemplateShapeError(
                f"{logical_id}: expected EventSourceArn !GetAtt T.StreamArn of a table and FunctionName"
                f" naming a function of the template whose Role is !GetAtt R.Arn; got {source!r}, {function_id!r}"
            )
        found.setdefault(role_id, set()).add(tables[source["Fn::GetAtt"][0]])
    return found
