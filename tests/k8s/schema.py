#!/usr/bin/python3
"""tests/k8s/schema.py: check Kubernetes manifests against the API's field
names and types, without a cluster.

kubectl cannot validate without a server (`--validate` downloads the
server's OpenAPI document, and `--dry-run=client` still asks the server
which kinds exist), so this checks against the Kubernetes API as Debian's
python3-kubernetes carries it: every model class (V1Pod, V1Container, ...)
lists its fields' JSON names (attribute_map) and types (openapi_types), and
its setters refuse None for a required field and a value outside an enum.
A field that is not in the model (a misspelling), a value of the wrong
type, and a missing required field are each an error naming the document
and the field's path.

Usage: schema.py FILE...  (YAML streams or JSON; a v1 List's items are
checked one by one).  Prints one line per error and "schema: N documents,
M errors"; exits 1 if any.  As a module: check_doc(doc) -> [errors].
"""
import json
import re
import sys

import yaml
from kubernetes import client as k8s

# kind -> (apiVersion, model class name).  Only the kinds sbx renders and
# deploys; anything else is an error (an unknown kind is not checked).
KINDS = {
    "Pod": ("v1", "V1Pod"),
    "ConfigMap": ("v1", "V1ConfigMap"),
    "Secret": ("v1", "V1Secret"),
    "Namespace": ("v1", "V1Namespace"),
    "ServiceAccount": ("v1", "V1ServiceAccount"),
    "Service": ("v1", "V1Service"),
    "PersistentVolumeClaim": ("v1", "V1PersistentVolumeClaim"),
    "DaemonSet": ("apps/v1", "V1DaemonSet"),
    "Deployment": ("apps/v1", "V1Deployment"),
    "NetworkPolicy": ("networking.k8s.io/v1", "V1NetworkPolicy"),
    "RuntimeClass": ("node.k8s.io/v1", "V1RuntimeClass"),
}

_required_cache = {}


def _cfg():
    c = k8s.Configuration()
    c.client_side_validation = True
    return c


def _blank(cls):
    o = cls.__new__(cls)
    o.local_vars_configuration = _cfg()
    for attr in cls.openapi_types:
        setattr(o, "_" + attr, None)
    return o


def required(cls):
    """The JSON names of cls's required fields: those whose setter
    refuses None."""
    if cls in _required_cache:
        return _required_cache[cls]
    req = set()
    for attr in cls.openapi_types:
        o = _blank(cls)
        try:
            setattr(o, attr, None)
        except ValueError as e:
            if "must not be `None`" in str(e):
                req.add(cls.attribute_map[attr])
    _required_cache[cls] = req
    return req


def _type_name(v):
    return type(v).__name__


def check_value(v, t, path, errs):
    """Check value v against the client's type string t."""
    m = re.fullmatch(r"list\[(.+)\]", t)
    if m:
        if not isinstance(v, list):
            errs.append("%s: expected a list (%s), got %s" % (path, t, _type_name(v)))
            return
        for i, x in enumerate(v):
            check_value(x, m.group(1), "%s[%d]" % (path, i), errs)
        return
    m = re.fullmatch(r"dict\(str, (.+)\)", t)
    if m:
        if not isinstance(v, dict):
            errs.append("%s: expected a map (%s), got %s" % (path, t, _type_name(v)))
            return
        for k, x in v.items():
            if not isinstance(k, str):
                errs.append("%s: key %r is not a string" % (path, k))
            check_value(x, m.group(1), "%s.%s" % (path, k), errs)
        return
    if t == "str" or t == "datetime":
        if not isinstance(v, str):
            errs.append("%s: expected a string, got %s %r" % (path, _type_name(v), v))
        return
    if t == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            errs.append("%s: expected an integer, got %s %r" % (path, _type_name(v), v))
        return
    if t == "float":
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            errs.append("%s: expected a number, got %s %r" % (path, _type_name(v), v))
        return
    if t == "bool":
        if not isinstance(v, bool):
            errs.append("%s: expected true or false, got %s %r" % (path, _type_name(v), v))
        return
    if t == "object":
        # IntOrString and free-form fields.
        return
    cls = getattr(k8s, t, None)
    if cls is None:
        errs.append("%s: the schema has no type %s" % (path, t))
        return
    check_model(v, cls, path, errs)


def check_model(v, cls, path, errs):
    if not isinstance(v, dict):
        errs.append("%s: expected an object (%s), got %s" % (path, cls.__name__, _type_name(v)))
        return
    by_json = {j: a for a, j in cls.attribute_map.items()}
    for k, x in v.items():
        if k not in by_json:
            errs.append("%s: unknown field \"%s\" in %s" % (path, k, cls.__name__))
            continue
        attr = by_json[k]
        t = cls.openapi_types[attr]
        sub = "%s.%s" % (path, k)
        n = len(errs)
        check_value(x, t, sub, errs)
        # The setter's own checks (enums) on a well-typed scalar.
        if len(errs) == n and x is not None and t in ("str", "int", "bool"):
            o = _blank(cls)
            try:
                setattr(o, attr, x)
            except ValueError as e:
                errs.append("%s: %s" % (sub, e))
    for r in sorted(required(cls)):
        if r not in v or v[r] is None:
            errs.append("%s: missing required field \"%s\" of %s" % (path, r, cls.__name__))


def check_doc(doc, where="document"):
    errs = []
    if not isinstance(doc, dict):
        return ["%s: not an object" % where]
    kind = doc.get("kind")
    if kind == "List" and doc.get("apiVersion") == "v1":
        items = doc.get("items")
        if not isinstance(items, list):
            return ["%s: List without items" % where]
        for i, d in enumerate(items):
            errs += check_doc(d, "%s.items[%d]" % (where, i))
        return errs
    if kind not in KINDS:
        return ["%s: kind %r is not one this check knows" % (where, kind)]
    api, name = KINDS[kind]
    if doc.get("apiVersion") != api:
        errs.append("%s: %s has apiVersion %r, not %r" % (where, kind, doc.get("apiVersion"), api))
    where = "%s (%s %s)" % (where, kind, (doc.get("metadata") or {}).get("name", "?"))
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        errs.append("%s: metadata.name missing" % where)
    check_model(doc, getattr(k8s, name), where, errs)
    return errs


def load(path):
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    if text.lstrip().startswith("{"):
        return [json.loads(text)]
    return [d for d in yaml.safe_load_all(text) if d is not None]


def main(argv):
    ndocs = nerr = 0
    for p in argv[1:]:
        try:
            docs = load(p)
        except Exception as e:  # a file that does not parse is an error
            print("%s: does not parse: %s" % (p, e))
            nerr += 1
            continue
        for i, d in enumerate(docs):
            ndocs += 1
            for e in check_doc(d, "%s[%d]" % (p, i)):
                print(e)
                nerr += 1
    print("schema: %d documents, %d errors" % (ndocs, nerr))
    return 1 if nerr or ndocs == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
