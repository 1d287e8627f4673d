"""openapi_check.py: docs/openapi.yaml as a checker, for
openapi_conformance.py. lint() checks the document itself (OpenAPI 3.1
structure: every object has only its fixed fields, every $ref resolves,
every schema is a valid JSON Schema 2020-12, path templates match their
parameters, security names exist, every example fits its schema); Contract.check() holds one live answer to
the operation it was sent to: a status, a header or a body field the
document does not describe is a failure, and so is a required header
missing or a body its schema refuses. Uses python3-yaml and
python3-jsonschema (Debian 12); $ref is resolved here."""
import copy
import json
import re

import jsonschema
import yaml

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# hop-by-hop and framing fields every answer carries: HTTP's business, not
# the API's (OpenAPI describes Content-Type through "content")
TRANSPORT = {"content-length", "content-type", "date", "connection"}


def load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def pointer(doc, ref):
    """The node a local $ref names; KeyError when it names nothing."""
    if not ref.startswith("#/"):
        raise KeyError("only local references: " + ref)
    node = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[part]
    return node


def deref(doc, node, seen=()):
    """node with every $ref replaced by what it names (a copy); siblings of a
    $ref (3.1 allows description beside it) are kept."""
    if isinstance(node, list):
        return [deref(doc, n, seen) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        if ref in seen:
            raise ValueError("recursive $ref " + ref)
        target = deref(doc, pointer(doc, ref), seen + (ref,))
        rest = {k: deref(doc, v, seen) for k, v in node.items() if k != "$ref"}
        if isinstance(target, dict):
            merged = dict(target)
            merged.update(rest)
            return merged
        return target
    return {k: deref(doc, v, seen) for k, v in node.items()}


# The fixed fields of each OpenAPI 3.1 object (the specification's tables):
# any other key, except an x- extension, is a typo the tools would ignore.
FIELDS = {
    "openapi": {"openapi", "info", "jsonSchemaDialect", "servers", "paths", "webhooks", "components", "security",
                "tags", "externalDocs"},
    "info": {"title", "summary", "description", "termsOfService", "contact", "license", "version"},
    "server": {"url", "description", "variables"},
    "tag": {"name", "description", "externalDocs"},
    "pathItem": {"$ref", "summary", "description", "servers", "parameters"} | set(METHODS),
    "operation": {"tags", "summary", "description", "externalDocs", "operationId", "parameters", "requestBody",
                  "responses", "callbacks", "deprecated", "security", "servers"},
    "parameter": {"name", "in", "description", "required", "deprecated", "allowEmptyValue", "style", "explode",
                  "allowReserved", "schema", "example", "examples", "content"},
    "header": {"description", "required", "deprecated", "allowEmptyValue", "style", "explode", "allowReserved",
               "schema", "example", "examples", "content"},
    "requestBody": {"description", "content", "required"},
    "mediaType": {"schema", "example", "examples", "encoding"},
    "response": {"description", "headers", "content", "links"},
    "example": {"summary", "description", "value", "externalValue"},
    "components": {"schemas", "responses", "parameters", "examples", "requestBodies", "headers", "securitySchemes",
                   "links", "callbacks", "pathItems"},
    "securityScheme": {"type", "description", "name", "in", "scheme", "bearerFormat", "flows", "openIdConnectUrl"},
    "reference": {"$ref", "summary", "description"},
}


def _fields(kind, node, where, problems):
    """Unknown keys of one object of the given kind (a $ref is a Reference Object)."""
    if not isinstance(node, dict):
        problems.append("%s: not an object" % where)
        return
    allowed = FIELDS["reference" if "$ref" in node and kind != "pathItem" else kind]
    for k in node:
        if k not in allowed and not str(k).startswith("x-"):
            problems.append("%s: %r is not a field of a%s %s object" % (where, k, "n" if kind[0] in "aeiou" else "",
                                                                        kind))


def _lint_fields(doc, problems):
    """Every object of the document against its fixed fields."""
    _fields("openapi", doc, "", problems)
    _fields("info", doc.get("info", {}), "info", problems)
    for i, srv in enumerate(doc.get("servers", [])):
        _fields("server", srv, "servers/%d" % i, problems)
    for i, tag in enumerate(doc.get("tags", [])):
        _fields("tag", tag, "tags/%d" % i, problems)
    comp = doc.get("components", {})
    _fields("components", comp, "components", problems)
    for kind, key in (("parameter", "parameters"), ("header", "headers"), ("response", "responses"),
                      ("example", "examples"), ("requestBody", "requestBodies"), ("securityScheme", "securitySchemes")):
        for name, node in comp.get(key, {}).items():
            _lint_object(kind, node, "components/%s/%s" % (key, name), problems)
    for path, item in doc.get("paths", {}).items():
        _fields("pathItem", item, "paths/" + path, problems)
        for i, p in enumerate(item.get("parameters", [])):
            _lint_object("parameter", p, "paths/%s/parameters/%d" % (path, i), problems)
        for method in METHODS:
            if method in item:
                _lint_object("operation", item[method], "paths/%s/%s" % (path, method), problems)


def _lint_object(kind, node, where, problems):
    """One object and the objects inside it."""
    _fields(kind, node, where, problems)
    if not isinstance(node, dict) or "$ref" in node:
        return
    if kind == "operation":
        for i, p in enumerate(node.get("parameters", [])):
            _lint_object("parameter", p, "%s/parameters/%d" % (where, i), problems)
        if "requestBody" in node:
            _lint_object("requestBody", node["requestBody"], where + "/requestBody", problems)
        for status, resp in node.get("responses", {}).items():
            _lint_object("response", resp, "%s/responses/%s" % (where, status), problems)
    for name, h in (node.get("headers") or {}).items() if kind == "response" else ():
        _lint_object("header", h, "%s/headers/%s" % (where, name), problems)
    for ctype, media in (node.get("content") or {}).items():
        _lint_object("mediaType", media, "%s/content/%s" % (where, ctype), problems)
    for name, ex in (node.get("examples") or {}).items() if kind != "example" else ():
        _lint_object("example", ex, "%s/examples/%s" % (where, name), problems)


def walk(node, path=""):
    """(json path, dict) for every object in node."""
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from walk(v, path + "/" + str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, "%s/%d" % (path, i))


def schema_errors(schema, value):
    """The messages of jsonschema 2020-12 refusing value ([] when it fits)."""
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    return [e.message for e in v.iter_errors(value)]


def _lint_examples(where, obj, problems):
    """example / examples of a media type, parameter or header against its schema."""
    schema = obj.get("schema")
    if schema is None:
        return
    samples = []
    if "example" in obj:
        samples.append(("example", obj["example"]))
    for name, ex in (obj.get("examples") or {}).items():
        if "value" in ex:
            samples.append(("examples/" + name, ex["value"]))
    for name, value in samples:
        for msg in schema_errors(schema, value):
            problems.append("%s/%s does not fit its schema: %s" % (where, name, msg))


def _lint_operation(doc, path, method, op, path_params, problems, op_ids):
    where = "paths/%s/%s" % (path, method)
    oid = op.get("operationId")
    if not oid:
        problems.append(where + ": no operationId")
    elif oid in op_ids:
        problems.append(where + ": operationId %s twice" % oid)
    op_ids.add(oid)
    params = path_params + [deref(doc, p) for p in op.get("parameters", [])]
    declared = {p["name"] for p in params if p.get("in") == "path"}
    templated = set(re.findall(r"{([^}]+)}", path))
    if declared != templated:
        problems.append("%s: path parameters %s, template %s" % (where, sorted(declared), sorted(templated)))
    for p in params:
        if p.get("in") not in ("path", "query", "header", "cookie") or "name" not in p:
            problems.append("%s: parameter %r has no name or a bad 'in'" % (where, p))
        if p.get("in") == "path" and p.get("required") is not True:
            problems.append("%s: path parameter %s must be required" % (where, p.get("name")))
    schemes = doc.get("components", {}).get("securitySchemes", {})
    for req in op.get("security", doc.get("security", [])):
        for name in req:
            if name not in schemes:
                problems.append("%s: security scheme %s is not defined" % (where, name))
    responses = op.get("responses") or {}
    if not responses:
        problems.append(where + ": no responses")
    for status, resp in responses.items():
        if not re.fullmatch(r"[1-5][0-9X]{2}|default", str(status)):
            problems.append("%s: response key %r is not a status" % (where, status))
        if not isinstance(status, str):
            problems.append("%s: status %r must be a string (quote it)" % (where, status))
        if "description" not in deref(doc, resp):
            problems.append("%s/%s: no description" % (where, status))


def lint(doc):
    """Problems found in the document ([] when none)."""
    problems = []
    if not str(doc.get("openapi", "")).startswith("3.1."):
        problems.append("openapi must be 3.1.x, is %r" % doc.get("openapi"))
    for key in ("title", "version"):
        if key not in doc.get("info", {}):
            problems.append("info.%s missing" % key)
    for where, node in walk(doc):
        ref = node.get("$ref")
        if isinstance(ref, str):
            try:
                pointer(doc, ref)
            except (KeyError, TypeError):
                problems.append("%s: $ref %s resolves to nothing" % (where, ref))
    _lint_fields(doc, problems)
    if problems:
        return problems  # nothing below can be read without the references
    full = deref(doc, doc)
    for where, node in walk(full):
        if isinstance(node.get("schema"), dict):
            try:
                jsonschema.Draft202012Validator.check_schema(node["schema"])
            except jsonschema.SchemaError as e:
                problems.append("%s/schema is not a JSON Schema 2020-12: %s" % (where, e.message))
                continue
            _lint_examples(where, node, problems)
    for name, schema in full.get("components", {}).get("schemas", {}).items():
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as e:
            problems.append("components/schemas/%s: %s" % (name, e.message))
    op_ids = set()
    for path, item in doc.get("paths", {}).items():
        if not path.startswith("/"):
            problems.append("path %s does not start with /" % path)
        path_params = [deref(doc, p) for p in item.get("parameters", [])]
        for method, op in item.items():
            if method in METHODS:
                _lint_operation(doc, path, method, op, path_params, problems, op_ids)
    return problems


def declared_fields(schema, value):
    """The property names schema describes for the object value, through
    allOf and the oneOf/anyOf branches value fits; None when it allows any."""
    names = set(schema.get("properties", {}))
    if schema.get("additionalProperties") not in (None, False) or schema.get("patternProperties"):
        return None
    for sub in schema.get("allOf", []):
        more = declared_fields(sub, value)
        if more is None:
            return None
        names |= more
    for key in ("oneOf", "anyOf"):
        for sub in schema.get(key, []):
            if not schema_errors(sub, value):
                more = declared_fields(sub, value)
                if more is None:
                    return None
                names |= more
    return names


def undocumented_fields(schema, value, where="body"):
    """Fields of value (recursively) its schema does not name."""
    out = []
    if isinstance(value, dict):
        names = declared_fields(schema, value)
        if names is not None:
            out += ["%s.%s" % (where, k) for k in value if k not in names]
        props = schema.get("properties", {})
        for k, v in value.items():
            if k in props:
                out += undocumented_fields(props[k], v, where + "." + k)
    return out


class Contract:
    """The operations of a document, by operationId, with their answers."""

    def __init__(self, doc):
        self.full = deref(doc, doc)
        self.ops = {}
        for path, item in self.full["paths"].items():
            for method, op in item.items():
                if method in METHODS:
                    self.ops[op["operationId"]] = (method.upper(), path, op)
        self.seen = {oid: set() for oid in self.ops}

    def listed(self):
        """{operationId: set of statuses the document lists}."""
        return {oid: set(op["responses"]) for oid, (_, _, op) in self.ops.items()}

    def check(self, oid, status, headers, body):
        """Problems of one answer (status int, headers {lower name: value},
        body bytes) to operation oid; [] when the document describes it."""
        method, path, op = self.ops[oid]
        where = "%s %s -> %d" % (method, path, status)
        resp = op["responses"].get(str(status))
        if resp is None:
            return ["%s: status not in the contract (listed: %s)" % (where, ", ".join(sorted(op["responses"])))]
        self.seen[oid].add(str(status))
        problems = []
        documented = {k.lower(): v for k, v in resp.get("headers", {}).items()}
        for name, value in headers.items():
            if name in TRANSPORT:
                continue
            if name not in documented:
                problems.append("%s: header %s not in the contract" % (where, name))
                continue
            for msg in schema_errors(documented[name].get("schema", {}), value):
                problems.append("%s: header %s %r: %s" % (where, name, value, msg))
        for name, h in documented.items():
            if h.get("required") and name not in headers:
                problems.append("%s: required header %s missing" % (where, name))
        return problems + self._check_body(where, resp.get("content"), headers.get("content-type"), body)

    def _check_body(self, where, content, ctype, body):
        if not content:
            return ["%s: a body the contract does not describe" % where] if body else []
        if ctype not in content:
            return ["%s: Content-Type %r not in the contract (%s)" % (where, ctype, ", ".join(content))]
        schema = content[ctype].get("schema", {})
        if ctype.startswith("application/json"):
            try:
                value = json.loads(body)
            except ValueError as e:
                return ["%s: body is not JSON (%s): %r" % (where, e, body[:200])]
        else:
            value = body.decode("utf-8", "replace")
        problems = ["%s: body %s: %s" % (where, json.dumps(value)[:200], m) for m in schema_errors(schema, value)]
        problems += ["%s: field %s not in the contract" % (where, f) for f in undocumented_fields(schema, value)]
        return problems

    def missing(self):
        """(operationId, status) listed in the document and never seen."""
        return sorted((oid, s) for oid, listed in self.listed().items() for s in listed - self.seen[oid])


def mutate(doc, dotted, value):
    """A copy of doc with the node at a JSON-pointer path (no #/) set to value (the
    test shows the checker failing on a deliberately wrong document)."""
    out = copy.deepcopy(doc)
    node = out
    parts = [p.replace("~1", "/").replace("~0", "~") for p in dotted.split("/")]
    for p in parts[:-1]:
        node = node[p]
    node[parts[-1]] = value
    return out
