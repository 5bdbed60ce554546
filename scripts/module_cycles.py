#!/usr/bin/env python3
"""Import cycles between the modules of a Rust crate.

Usage: module_cycles.py SRC_DIR [SRC_DIR ...]   (exit 1 if any crate has a cycle)

A module is a file (`a/b.rs` or `a/b/mod.rs` is `a::b`; `main.rs` beside a `lib.rs` is a crate
of its own and is left out). Module A depends on module B when
A's code names a path into B (`crate::b::...`, `super::...`/`self::...` resolved from A, or
a path from one of A's child modules, `child::...`), in a `use` item or inline, followed
through re-exports to the module that defines the item (`crate::Error` depends on
`crate::error`, not on the crate root); `mod b;` declarations are not dependencies. A child naming its
parent is an edge like any other, so a leaf module that imports its orchestrator while the
orchestrator uses it is a cycle. Comments, string literals and test modules (`tests.rs`
files and inline `#[cfg(test)] mod`s, which may look at their parent) are left out.
"""

import os
import re
import sys



def module_files(src):
    mods = {}
    for root, _dirs, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(root, f), src)[:-3].split(os.sep)
            if rel[-1] == "mod":
                rel = rel[:-1]
            if rel in (["lib"], ["main"]):
                rel = []
            mods[tuple(rel)] = os.path.join(root, f)
    # with a library beside it, main.rs is a crate of its own that uses the library
    if os.path.exists(os.path.join(src, "lib.rs")):
        mods[()] = os.path.join(src, "lib.rs")
    return mods


def strip(text):
    """The code without comments and string literals (they can name paths too)."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'r#*"(?:.|\n)*?"#*', '""', text)
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', text)


def without_test_modules(text):
    """The code without inline `#[cfg(test)] mod name { ... }` blocks."""
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def inline_modules_as_self(code):
    """Inside an inline `mod name { ... }`, `super::` names the file's own module: written
    as `self::`, which is how this script reads a path from the file's module."""
    out, i = [], 0
    for m in re.finditer(r"\bmod\s+\w+\s*\{", code):
        if m.start() < i:
            continue
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        out.append(code[i : m.end()])
        out.append(re.sub(r"\bsuper::", "self::", code[m.end() : j]))
        i = j
    out.append(code[i:])
    return "".join(out)


def expand_uses(code):
    """`use a::{b, c::{d, e}};` written out as `use a::b; use a::c::d; use a::c::e;`, so that
    every path of a group is seen whole."""

    def paths(prefix, body):
        out, depth, item = [], 0, ""
        for ch in body + ",":
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                item = item.strip()
                if item:
                    m = re.match(r"^(.*?)::\{(.*)\}$", item, re.S)
                    if m:
                        out += paths(prefix + m.group(1) + "::", m.group(2))
                    else:
                        out.append(prefix + item)
                item = ""
            else:
                item += ch
        return out

    def one(m):
        vis, body = m.group(1), m.group(2).strip()
        g = re.match(r"^(.*?)::\{(.*)\}$", body, re.S)
        items = paths(g.group(1) + "::", g.group(2)) if g else [body]
        return " ".join(f"{vis}use {i};" for i in items)

    return re.sub(r"((?:pub(?:\([^)]*\))?\s+)?)use\s+([^;]+);", one, code)


def module_of(mods, here, path):
    """The module a path names from `here`, and the rest of the path after it; None for a
    path outside the crate."""
    parts = [p for p in path.split("::") if p]
    if not parts:
        return None
    if parts[0] == "crate":
        base, parts = (), parts[1:]
    elif parts[0] == "self":
        base, parts = here, parts[1:]
    elif parts[0] == "super":
        base = here
        while parts and parts[0] == "super":
            base, parts = base[:-1], parts[1:]
    elif here + (parts[0],) in mods:
        base = here
    else:
        return None
    while parts and base + (parts[0],) in mods:
        base, parts = base + (parts[0],), parts[1:]
    return base, parts


def reexports(mods, codes):
    """For each module, the names it re-exports (`pub use path::X as Y;`) and where from."""
    table = {m: {} for m in mods}
    for m, code in codes.items():
        for path in re.findall(r"pub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
            alias = re.match(r"^(.*?)\s+as\s+(\w+)$", path.strip())
            path, name = (alias.group(1), alias.group(2)) if alias else (path.strip(), path.strip().split("::")[-1])
            found = module_of(mods, m, path)
            if found and name != "*":
                table[m][name] = found
        # `#[macro_export]` macros are named from the crate root
        for name in re.findall(r"#\[macro_export\]\s*macro_rules!\s*(\w+)", code):
            table[()][name] = (m, [])
    return table


def target(mods, table, found, seen=0):
    """The module that defines what `found` (a module and a rest) names, through re-exports."""
    module, rest = found
    if rest and seen < 8:
        via = table.get(module, {}).get(rest[0])
        if via and via[0] != module:
            return target(mods, table, (via[0], via[1] + rest[1:]) if via[1] else (via[0], rest[1:]), seen + 1)
    return module


PATHS = re.compile(r"(?<![:\w])((?:crate|super|self|[a-z_][a-z0-9_]*)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")


def edges(mods):
    codes = {}
    for m, path in mods.items():
        if m and m[-1] == "tests":
            continue
        code = without_test_modules(strip(open(path, encoding="utf-8").read()))
        codes[m] = expand_uses(inline_modules_as_self(code))
    table = reexports(mods, codes)
    graph = {m: set() for m in mods}
    for m, code in codes.items():
        for path in PATHS.findall(code):
            found = module_of(mods, m, path)
            if found is None:
                continue
            t = target(mods, table, found)
            if t != m and t in mods:
                graph[m].add(t)
    return graph


def cycles(graph):
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def name(m):
    return "::".join(("crate",) + m)


def main():
    bad = 0
    for src in sys.argv[1:]:
        graph = edges(module_files(src))
        found = cycles(graph)
        print(f"{src}: {len(graph)} modules, {len(found)} cycles")
        for comp in found:
            bad += 1
            members = set(comp)
            print("  cycle: " + ", ".join(name(m) for m in comp))
            for m in comp:
                for t in sorted(graph[m] & members):
                    print(f"    {name(m)} -> {name(t)}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
