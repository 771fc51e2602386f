#!/usr/bin/env python3
"""`make lint`: no circle of calls between source files or folders.

A file calls another when it names a function the other defines (not
static) and no third file defines; a folder calls another when one of its
files does. A circle of such calls, between files or between folders,
means two parts that cannot be read or changed one without the other
(README.md, "Architecture"): a lower part reaches a higher one only
through something it was handed (a callback, a table of functions), which
is not a call by name and so is not counted.

Reads every .c file under services/, plugins/ and shared/src/ as text:
comments and string literals are dropped, then a definition is a line
starting with a type and a name followed by its parameters and `{`, a call
a name followed by `(`. Prints each circle and exits 1 when there is one.

    scripts/checkcircles.py [ROOT]        check ROOT (default: the repository)
    scripts/checkcircles.py --self-test   check the repository, then a
        planted circle of two files, which must be found
"""
import os
import re
import sys
import tempfile

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'')
DEFINITION = re.compile(
    r"^(?!static\b)[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\([^;{]*\)\s*\{", re.M)
CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def sources(root):
    """The .c files checked, relative to root."""
    for top in ("services", "plugins", os.path.join("shared", "src")):
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if name.endswith(".c"):
                    yield os.path.relpath(os.path.join(folder, name), root)


def calls_between(root):
    """{file: set of files it calls}."""
    text, defined = {}, {}
    for path in sources(root):
        with open(os.path.join(root, path), encoding="utf-8") as f:
            code = STRING.sub('""', COMMENT.sub(" ", f.read()))
        text[path] = code
        for m in DEFINITION.finditer(code):
            defined.setdefault(m.group(1), set()).add(path)
    edges = {path: set() for path in text}
    for path, code in text.items():
        for name in set(CALL.findall(code)):
            owners = defined.get(name, set())
            if len(owners) == 1 and path not in owners:
                edges[path] |= owners
    return edges


def circles(edges):
    """The strongly connected parts of more than one node (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    sys.setrecursionlimit(100000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def check(root):
    """Prints every circle under root; returns how many there are."""
    files = calls_between(root)
    folders = {}
    for path, callees in files.items():
        for callee in callees:
            a, b = os.path.dirname(path), os.path.dirname(callee)
            if a != b:
                folders.setdefault(a, set()).add(b)
    found = 0
    for kind, edges in (("files", files), ("folders", folders)):
        for part in circles(edges):
            print("checkcircles: these %s call each other: %s" % (kind, ", ".join(part)))
            found += 1
    return found


def self_test(root):
    """Checks root, then a planted circle, which must be reported."""
    if check(root):
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "services", "demo")
        os.makedirs(folder)
        with open(os.path.join(folder, "a.c"), "w", encoding="utf-8") as f:
            f.write('int a_one(void)\n{\n\treturn b_two() + 1; /* b_three() */\n}\n')
        with open(os.path.join(folder, "b.c"), "w", encoding="utf-8") as f:
            f.write('int b_two(void)\n{\n\treturn a_one() ? 0 : 2;\n}\n')
        print("checkcircles: a planted circle must be reported:")
        if check(tmp) != 1:
            print("checkcircles: the planted circle was not found")
            return 1
    return 0


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    if argv[1:2] == ["--self-test"]:
        return self_test(os.path.dirname(here))
    root = argv[1] if len(argv) > 1 else os.path.dirname(here)
    found = check(root)
    if not found:
        print("checkcircles: no circle between files or folders")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
