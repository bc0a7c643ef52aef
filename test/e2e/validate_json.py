#!/usr/bin/python3
"""Validates JSON documents against dsh-confine's schemas in docs/schemas (JSON Schema 2020-12).

    validate_json.py SCHEMA[#/JSON/POINTER] FILE...   exit 0 if every FILE is valid, 1 if not
    validate_json.py --expect-invalid SCHEMA FILE...  exit 0 if every FILE is invalid
    validate_json.py --check-schemas DIR              every *.schema.json is a valid 2020-12 schema

A schema's relative "$ref" (e.g. "policy.schema.json") resolves to its sibling file. Exit 2:
bad usage, unreadable input, or no jsonschema module (Debian: python3-jsonschema).
"""
import json
import pathlib
import sys

try:
    import jsonschema
    from jsonschema import Draft202012Validator
except ImportError as error:  # the caller turns this into a skip
    print(f"validate_json.py: jsonschema is not importable: {error}", file=sys.stderr)
    sys.exit(2)


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def validator_for(reference):
    """A validator for SCHEMA[#pointer], with every sibling schema preloaded for relative $refs."""
    file_part, _, pointer = reference.partition("#")
    schema_path = pathlib.Path(file_part).resolve()
    store = {p.as_uri(): load(p) for p in schema_path.parent.glob("*.schema.json")}
    base = schema_path.as_uri()
    root = store[base] if base in store else load(schema_path)
    Draft202012Validator.check_schema(root)
    entry = {"$ref": base + "#" + pointer}  # the whole schema when pointer is empty
    try:  # jsonschema >= 4.18 resolves through a registry
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT202012
    except ImportError:  # Debian 12's jsonschema 4.10
        return Draft202012Validator(entry, resolver=jsonschema.RefResolver(base_uri=base, referrer=root, store=store))
    registry = Registry().with_resources(
        (uri, Resource.from_contents(contents, default_specification=DRAFT202012)) for uri, contents in store.items())
    return Draft202012Validator(entry, registry=registry)


def short(text, limit=200):
    return text if len(text) <= limit else text[:limit] + "..."


def describe(error):
    """The error and, for oneOf/anyOf, why each branch failed; instances are cut short."""
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    message = f"matches none of its {error.validator} branches" if error.context else short(error.message)
    lines = [f"  at {where}: {message}"]
    seen = set()
    for sub in sorted(error.context, key=lambda e: (list(e.schema_path)[:1], list(e.absolute_path))):
        sub_where = "/".join(str(p) for p in sub.absolute_path) or "(root)"
        branch = sub.schema_path[0] if sub.schema_path else "?"
        line = f"    - branch {branch}, at {sub_where}: {short(sub.message)}"
        if line not in seen:
            seen.add(line)
            lines.append(line)
    return "\n".join(lines)


def main(argv):
    if len(argv) == 2 and argv[0] == "--check-schemas":
        paths = sorted(pathlib.Path(argv[1]).glob("*.schema.json"))
        if not paths:
            print(f"validate_json.py: no *.schema.json in {argv[1]}", file=sys.stderr)
            return 1
        for path in paths:
            try:
                Draft202012Validator.check_schema(load(path))
            except (jsonschema.exceptions.SchemaError, ValueError) as error:
                print(f"{path}: not a valid schema: {error}", file=sys.stderr)
                return 1
        return 0
    expect_invalid = bool(argv) and argv[0] == "--expect-invalid"
    if expect_invalid:
        argv = argv[1:]
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    validator = validator_for(argv[0])
    status = 0
    for path in argv[1:]:
        try:
            document = load(path)
        except (OSError, ValueError) as error:
            print(f"{path}: not a JSON document: {error}", file=sys.stderr)
            return 2
        errors = list(validator.iter_errors(document))
        if expect_invalid and not errors:
            print(f"{path}: valid against {argv[0]}, but it should not be", file=sys.stderr)
            status = 1
        elif not expect_invalid and errors:
            print(f"{path}: invalid against {argv[0]}:", file=sys.stderr)
            for error in errors:
                print(describe(error), file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
