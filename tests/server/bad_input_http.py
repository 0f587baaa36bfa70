#!/usr/bin/env python3
"""bad_input_http.py ROWS URL WRITE_TOKEN ADMIN_TOKEN DOCTX STORE

The translator of tests/server/bad_input_http.sh: reads the rows it
recorded from tests/cli/bad_input.rows and sends each as doctxd's HTTP
request (docs/server.md, "Routes").  Prints one line per check: "ok" or
"FAIL: ...", and a summary of the rows it skipped.

THE TRANSLATION.  A command's route is its subcommand's (COMMANDS below).
Its positional arguments go to the route's path parameters and body
fields in order; an option --x-y goes to the field x_y (--project to
projection), a flag to true.  A JSON argument's TEXT is put into the body
verbatim, so a value the CLI refuses as BADJSON makes the body malformed
at that field, and doctxd must refuse it with the same name, naming the
field (the JSON arguments go last, so a malformed one swallows nothing
else).  An integer argument is sent as the JSON number it spells (its
digits verbatim, so one past int64 is the body's BADJSON), any other
value as a JSON string.  A `-` argument whose stdin holds a NUL byte is
sent as that stdin's bytes verbatim: the body then holds the NUL.

THE EXPECTATION.  The CLI's exit 2 is 400, exit 3 is 409 and exit 1 is
409 NOMATCH, except NOTFOUND and NOACCOUNT, 404 (docs/server.md, "Status
codes"); the problem+json `code` is the row's NAME, and its `detail`
holds the row's MENTION with an argument's CLI label turned into its
field (FILTER -> filter, DOC 2 -> docs[1], --sort -> sort, ...).  Three
kinds of row have an HTTP counterpart under another name, by rule:
  - USAGE, the CLI's argv parser's own name, is doctxd's body checker's:
    400 INVAL (an unknown field, a wrong type, out of range) or BADJSON
    (a repeated field, a number past int64), its detail naming the field
    (and the value, when the CLI's names it: "--priority 99999999999"
    -> "priority 99999999999");
  - a NUL byte from stdin ("ARG: a NUL byte at byte N of stdin") is
    BADJSON "FIELD: the body holds a NUL byte at offset N";
  - a document nested past 100 levels is refused by doctxd's body limit
    first: INVAL "nests deeper than 64 levels" (docs/server.md).
Every group of GROUP rows (and the last) is followed by one `doctx dump`,
compared with the one before: no refused request may change the store.

THE SKIPS, each by a rule (the count is printed; more than a quarter of
the rows skipped fails the suite):
  - no route: the command has no HTTP route (rules, collections,
    batch-update, interest, worker, job work, account limit, an unknown
    command);
  - command line: the row tests argv itself -- a global option before
    the command (--store, --verbose, --version, --), a DOCTX_FAULT
    environment, a missing or extra positional argument, `--` among the
    arguments (an option last without its value is sent as `true`);
  - empty path parameter: an empty id, name or queue in the path
    (/v1/locks//acquire is no route, it cannot carry one).
"""
import http.client
import json
import os
import re
import subprocess
import sys
import urllib.parse

GROUP = 10
VERBOSE = os.environ.get("BAD_INPUT_HTTP_VERBOSE")
INT_RE = re.compile(r"^-?[0-9]+$")

# CLI words -> (method, path, positional args, scope token).  A positional
# is '@name' (a path parameter), 'name:json' (raw JSON text), 'name:int',
# 'name' (a string), with '?' when optional and '*' for the rest.
C = "/v1/c/{}/"
COMMANDS = {
    ("find",): ("POST", C + "find", ["@coll", "filter:json?"]),
    ("count",): ("POST", C + "count", ["@coll", "filter:json?"]),
    ("insert",): ("POST", C + "insert", ["@coll", "docs:json*"]),
    ("update",): ("POST", C + "update", ["@coll", "filter:json", "update:json"]),
    ("find-and-modify",): ("POST", C + "find-and-modify",
                           ["@coll", "filter:json", "update:json"]),
    ("delete",): ("POST", C + "delete", ["@coll", "filter:json"]),
    ("index",): ("POST", C + "indexes", ["@coll", "keys:json"]),
    ("aggregate",): ("POST", C + "aggregate", ["@coll", "pipeline:json"]),
    ("transfer",): ("POST", "/v1/transfers", ["from", "to", "amount:int"]),
    ("account", "create"): ("POST", "/v1/accounts", ["id"]),
    ("lock", "acquire"): ("POST", "/v1/locks/{}/acquire", ["@name"]),
    ("lock", "renew"): ("POST", "/v1/locks/{}/renew", ["@name", "token:int"]),
    ("lock", "release"): ("POST", "/v1/locks/{}/release",
                          ["@name", "token:int"]),
    ("job", "add"): ("POST", "/v1/queues/{}/jobs",
                     ["@q", "type", "payload:json?"]),
    ("job", "effect"): ("POST", "/v1/jobs/{}/effect",
                        ["@id", "epoch:int", "key", "coll", "filter:json",
                         "update:json"]),
    ("ledger", "post"): ("POST", "/v1/ledger/entries", ["legs:leg*"]),
    ("ledger", "account", "create"): ("POST", "/v1/ledger/accounts", ["id"]),
    ("ledger", "reverse"): ("POST", "/v1/ledger/entries/{}/reverse", ["@id"]),
    ("ledger", "void"): ("POST", "/v1/ledger/entries/{}/void", ["@id"]),
    ("ledger", "post-pending"): ("POST", "/v1/ledger/entries/{}/post",
                                 ["@id"]),
    ("order", "create"): ("POST", "/v1/orders/{}/create", ["@trade_id"]),
    ("version", "put"): ("POST", "/v1/versions/{}/put",
                         ["@item", "root:json"]),
    ("sync", "update"): ("POST", "/v1/sync/{}/update",
                         ["@name", "master_id", "update:json"]),
    ("recover",): ("POST", "/v1/admin/recover", []),
}
ADMIN = {("recover",)}
FLAGS = {"--many", "--upsert", "--new", "--unique", "--sparse",
         "--bypass-validation", "--pending", "--async", "--clear"}
JSON_OPTS = {"--sort", "--project", "--array-filters"}
RENAME = {"--project": "projection"}
# The CLI's labels of its JSON arguments, as the detail names their fields.
LABELS = {"FILTER": "filter", "UPDATE": "update", "DOC": "docs[0]",
          "KEYS": "keys", "PIPELINE": "pipeline", "ROOT": "root",
          "PAYLOAD": "payload", "child DOC": "child"}


class Skip(Exception):
    pass


def field_of(opt):
    return RENAME.get(opt, opt[2:].replace("-", "_"))


def label_to_field(m):
    mm = re.fullmatch(r"DOC (\d+)", m)
    if mm:
        return "docs[%d]" % (int(mm.group(1)) - 1)
    if m in LABELS:
        return LABELS[m]
    if m.startswith("--"):
        return field_of(m)
    return m


def lit(kind, text):
    """The body text of one argument."""
    b = text.encode("utf-8", "surrogateescape")
    if kind == "json":
        return b
    if kind == "int" or INT_RE.match(text):
        if INT_RE.match(text):
            return b
    return json.dumps(text).encode()


def parses(text):
    try:
        json.loads(text)
        return True
    except (ValueError, RecursionError):
        return False


def translate(words, stdin):
    """(method, path, body bytes, admin?) for a row's argv, or Skip."""
    if words and words[0].startswith("-"):
        raise Skip("command line")
    for n in (3, 2, 1):
        key = tuple(words[:n])
        if key in COMMANDS:
            break
    else:
        raise Skip("no route")
    method, path, spec = COMMANDS[key]
    args = words[n:]
    pos, opts = [], []  # (field, its body text, JSON text?)
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            raise Skip("command line")
        if a.startswith("--") and len(a) > 2:
            name, eq, val = a.partition("=")
            if eq:
                opts.append((field_of(name), lit("str", val), False))
            elif name in FLAGS or i + 1 >= len(args):
                # (an option last without its value is sent as a flag:
                # doctxd refuses the field as unknown or of the wrong type)
                opts.append((field_of(name), b"true", False))
            else:
                i += 1
                val = args[i]
                if name == "--child":
                    k, _, doc = val.partition("=")
                    text = stdin if doc == "-" and stdin is not None else \
                        doc.encode()
                    opts.append(("child", b"{" + json.dumps(k).encode() +
                                 b":" + text + b"}", True))
                elif val == "-" and stdin is not None:
                    opts.append((field_of(name), stdin, True))
                else:
                    kind = "json" if name in JSON_OPTS else "str"
                    opts.append((field_of(name), lit(kind, val),
                                 kind == "json"))
        else:
            pos.append(a)
        i += 1
    params, fields = [], []
    for s in spec:
        name, _, kind = s.lstrip("@").partition(":")
        opt, rest = kind.endswith("?"), kind.endswith("*")
        kind = kind.rstrip("?*")
        if rest:
            vals, pos = pos, []
            if not vals:
                raise Skip("command line")
            if kind == "leg":
                items = []
                for v in vals:
                    acc, _, val = v.rpartition(":")
                    items.append(b'{"account":' + json.dumps(acc).encode() +
                                 b',"value":' + lit("int", val) + b"}")
            else:
                items = [stdin if v == "-" and stdin is not None else
                         lit(kind, v) for v in vals]
            fields.append((name, b"[" + b",".join(items) + b"]", True))
            continue
        if not pos:
            if opt:
                continue
            raise Skip("command line")
        v = pos.pop(0)
        if s.startswith("@"):
            if v == "":
                raise Skip("empty path parameter")
            params.append(urllib.parse.quote(v, safe=""))
        elif v == "-" and stdin is not None:
            fields.append((name, stdin, True))
        else:
            fields.append((name, lit(kind or "str", v), kind == "json"))
    if pos:
        raise Skip("command line")
    # JSON fields last, one that does not parse at the very end: it
    # swallows nothing after it.
    allf = opts + fields
    allf.sort(key=lambda f: (f[2], not parses(f[1])))
    body = b"{" + b",".join(json.dumps(k).encode() + b":" + v
                            for k, v, _ in allf) + b"}"
    return method, path.format(*params), body, key in ADMIN


def expect(code, name, mention, nul):
    """(statuses, names, mention) the answer must have."""
    if name in ("NOTFOUND", "NOACCOUNT"):
        status = 404
    else:
        status = {2: 400, 3: 409, 1: 409}[code]
    names = {name}
    if name == "USAGE":
        names = {"INVAL", "BADJSON"}
        m = re.search(r"(--[a-z-]+)( -?[0-9]+)?", mention)
        mention = field_of(m.group(1)) + (m.group(2) or "") if m else ""
    elif nul:
        mention = label_to_field(mention.split(":")[0]) + ": the body holds a NUL"
    elif name == "INVAL" and ("nests deeper" in mention or
                              "level 101" in mention):
        mention = "nests deeper than 64 levels"
    else:
        mention = label_to_field(mention)
    return status, names, mention


def read_rows(path):
    parts = open(path, "rb").read().split(b"\0")
    rows, i = [], 0
    while i < len(parts) and parts[i] == b"ROW":
        code, name, mention, infile, fault, nargs = parts[i + 1:i + 7]
        n = int(nargs)
        argv = [p.decode("utf-8", "surrogateescape")
                for p in parts[i + 7:i + 7 + n]]
        rows.append((int(code), name.decode(), mention.decode(),
                     infile.decode(), fault.decode(), argv))
        i += 7 + n
    return rows


def main():
    rows_path, url, t_write, t_admin, doctx, store = sys.argv[1:7]
    host = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(host.hostname, host.port, timeout=30)

    def dump():
        p = subprocess.run([doctx, "--store", store, "dump"],
                           capture_output=True, timeout=60)
        return p.stdout + p.stderr

    rows = read_rows(rows_path)
    skipped, sent, group = {}, 0, []
    before = dump()
    for code, name, mention, infile, fault, argv in rows:
        what = "doctx " + " ".join(argv)
        if len(what) > 160:
            what = what[:160] + "..."
        stdin = open(infile, "rb").read() if infile else None
        try:
            if fault:
                raise Skip("command line")
            method, path, body, admin = translate(argv, stdin)
        except Skip as e:
            skipped.setdefault(str(e), []).append(what)
            continue
        sent += 1
        status, names, mention = expect(code, name, mention, stdin is not None)
        conn.request(method, path, body=body, headers={
            "Authorization": "Bearer " + (t_admin if admin else t_write),
            "Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
        try:
            p = json.loads(raw)
        except ValueError:
            p = {}
        got = "%s %s %s" % (resp.status, p.get("code"), p.get("detail"))
        req = "%s %s %s" % (method, path, body[:200].decode("utf-8", "replace"))
        if resp.status != status or p.get("code") not in names:
            print("FAIL: %s: answered %s, want %d %s\n      request: %s" %
                  (what, got[:300], status, "|".join(sorted(names)), req))
        elif mention and mention not in (p.get("detail") or ""):
            print("FAIL: %s: detail does not mention '%s': %s\n      request: %s"
                  % (what, mention, got[:300], req))
        else:
            print("ok")
            if VERBOSE:
                print("  %s -> %s" % (req[:120], got[:160]))
        group.append(what)
        if len(group) == GROUP:
            before = check(dump, before, group)
    if group:
        check(dump, before, group)
    nskip = sum(len(v) for v in skipped.values())
    print("%d rows: %d sent, %d skipped (%s)" % (
        len(rows), sent, nskip,
        ", ".join("%s %d" % (k, len(v)) for k, v in sorted(skipped.items()))))
    if VERBOSE:
        for k, v in sorted(skipped.items()):
            print("".join("  skipped (%s): %s\n" % (k, w) for w in v), end="")
    if nskip * 4 > len(rows):
        print("FAIL: %d of %d rows skipped, more than a quarter" %
              (nskip, len(rows)))
    if len(rows) < 150:
        print("FAIL: only %d rows read from the table" % len(rows))


def check(dump, before, group):
    after = dump()
    if after != before:
        print("FAIL: the store changed during:%s" %
              "".join("\n        " + g for g in group))
    else:
        print("ok")
    group.clear()
    return after


if __name__ == "__main__":
    main()
