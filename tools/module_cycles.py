#!/usr/bin/env python3
"""Find import cycles between the modules of each crate in the Cargo workspace.

A crate is any `*/Cargo.toml` next to a `src/` folder. Its modules are found by following
`mod name;` declarations from `src/lib.rs` and `src/main.rs` (separate roots); modules
declared `#[cfg(test)]` and `#[cfg(test)]` items (e.g. `mod tests { ... }`) are left out.

Module A depends on module B when A's code (comments and string literals stripped) names an
item of B through `use` (any form: grouped, nested, multi-line, aliased, glob) or an inline
`crate::`, `self::`, `super::` or child-module path. A path resolves to its longest prefix
that is a module; the item it names is then followed through that module's `use`
re-exports (glob ones too) to the module that defines it. `mod x;` is no dependency, and a
crate root's own `pub use` lines are its public facade, not dependencies.

Prints each strongly connected component of more than one module with, for every edge in it,
one file:line that creates it. Exit status 1 when any cycle is found, 0 otherwise.
Usage: module_cycles.py [WORKSPACE_DIR]   (default: the parent of this script's folder)
"""
import re
import sys
from pathlib import Path

ITEM_DEF = re.compile(r"\b(?:fn|struct|enum|trait|type|const|static|union|mod)\s+(\w+)|macro_rules!\s*(\w+)")
CFG_TEST = re.compile(r"#\[\s*cfg\s*\(\s*(?:all\s*\(\s*)?test\b[^\]]*\]")
MOD_DECL = re.compile(r"(?:\bpub\s*(?:\([^)]*\))?\s*)?\bmod\s+(\w+)\s*;")
USE_DECL = re.compile(r"(\bpub\s*(?:\([^)]*\))?\s*)?\buse\s+([^;]*);")
INLINE_PATH = re.compile(r"(?<![\w:.])(\w+(?:\s*::\s*\w+)+)")
VIS_IN = re.compile(r"\bpub\s*\(\s*in\s+[^)]*\)")
LITERAL = re.compile(r"//[^\n]*|/\*.*?\*/|(?<!\w)b?r(#*)\".*?\"\1|b?\"(?:\\.|[^\"\\])*\"|'(?:\\.[^']*|[^\\'])'", re.S)


def blank(s):
    return re.sub(r"[^\n]", " ", s)


def strip(src):
    """`src` with comments and string/char literals blanked (same length, newlines kept)."""
    return LITERAL.sub(lambda m: blank(m.group()), src)


def item_end(text, i):
    """End of the item starting at `i`: its `;` at depth 0, or the `}` closing its first block."""
    depth = 0
    for j in range(i, len(text)):
        depth += (text[j] in "([{") - (text[j] in ")]}")
        if (text[j] == ";" and depth == 0) or (text[j] == "}" and depth == 0):
            return j + 1
    return len(text)


def drop_test_items(text):
    """Blank `#[cfg(test)]` items; returns (text, names of `#[cfg(test)] mod x;` files)."""
    test_mods, pos = set(), 0
    while m := CFG_TEST.search(text, pos):
        j = m.end()
        while a := re.compile(r"\s*#\[[^\]]*\]").match(text, j):  # further attributes
            j = a.end()
        if d := re.compile(r"\s*" + MOD_DECL.pattern).match(text, j):
            test_mods.add(d.group(1))
        pos = item_end(text, j)
        text = text[:m.start()] + blank(text[m.start():pos]) + text[pos:]
    return text, test_mods


def parse_use_tree(body, offset):
    """Leaves of a use tree as (segments, bound_name, is_glob, position)."""
    toks = [(t.group(), offset + t.start()) for t in re.finditer(r"::|\w+|\S", body)] + [("", 0)]
    leaves = []

    def walk(i, path):  # parses one tree after `path`; returns the index after it
        if toks[i][0] == "::":  # `::name`: an external crate
            path, i = ["::"], i + 1
        while toks[i][0] not in ("", ",", "}"):
            tok, pos = toks[i]
            if tok == "{":
                i += 1
                while toks[i][0] not in ("", "}"):
                    i = walk(i, path)
                    i += toks[i][0] == ","
                return i + 1
            if tok == "*":
                leaves.append((path, None, True, pos))
                return i + 1
            path, i = path + [tok], i + 1
            if toks[i][0] == "::":
                i += 1
                continue
            if tok == "self":  # `a::{self, ..}`
                path = path[:-1]
            alias = path[-1] if path else tok
            if toks[i][0] == "as":
                alias, i = toks[i + 1][0], i + 2
            leaves.append((path, alias, False, pos))
            return i
        return i

    walk(0, [])
    return leaves


class Module:
    def __init__(self, name, file, parent):
        self.name, self.file, self.parent, self.children = name, file, parent, {}
        self.root = parent.root if parent else self
        src = file.read_text(encoding="utf-8", errors="replace")
        self.text, test_mods = drop_test_items(strip(src))
        self.text = VIS_IN.sub(lambda m: blank(m.group()), self.text)
        self.defs = {a or b for a, b in ITEM_DEF.findall(self.text)}
        self.uses, self.imports, self.globs = [], {}, []
        code = list(self.text)
        for m in USE_DECL.finditer(self.text):
            for segs, alias, glob, pos in parse_use_tree(m.group(2), m.start(2)):
                self.uses.append((segs, glob, pos, bool(m.group(1))))
                if glob:
                    self.globs.append(segs)
                elif alias and alias != "_":
                    self.imports[alias] = segs
            code[m.start():m.end()] = blank(m.group())
        self.code = "".join(code)  # the text without its `use` declarations
        # Inline `mod x { ... }` blocks: counted as part of this file's module.
        self.inline_mods = [(b.start(), item_end(self.text, b.start()))
                            for b in re.finditer(r"\bmod\s+\w+\s*\{", self.text)]
        folder = file.parent if file.name in ("mod.rs", "lib.rs", "main.rs") else file.with_suffix("")
        for child in MOD_DECL.findall(self.text):
            if child in test_mods:
                continue
            for f in (folder / f"{child}.rs", folder / child / "mod.rs"):
                if f.is_file():
                    self.children[child] = Module(child, f, self)
                    break

    def label(self):  # `a::b`; the roots are `crate` (lib.rs) and `main`, main's modules `main::a`
        up = self.parent.label() if self.parent else ""
        return self.name if up in ("", "crate") else f"{up}::{self.name}"

    def in_file(self, segs, pos):
        """`segs` with the `super`s that only leave inline `mod x { }` blocks around `pos` dropped."""
        depth, dropped = sum(a <= pos < b for a, b in self.inline_mods), False
        while depth and segs and segs[0] == "super":
            depth, segs, dropped = depth - 1, segs[1:], True
        return ["self"] + segs if dropped else segs

    def walk(self):
        yield self
        for child in self.children.values():
            yield from child.walk()


def resolve(m, segs, seen=None):
    """The module defining what path `segs` (written in module `m`) names, or None if external."""
    if not segs:
        return None
    seen = set() if seen is None else seen
    if segs[0] == "crate":
        base, rest = m.root, segs[1:]
    elif segs[0] == "self":
        base, rest = m, segs[1:]
    elif segs[0] == "super":
        base, rest = m, list(segs)
        while base and rest and rest[0] == "super":
            base, rest = base.parent, rest[1:]
        if base is None:
            return None
    elif segs[0] in m.children:
        base, rest = m, segs
    else:
        return None
    while rest and rest[0] in base.children:
        base, rest = base.children[rest[0]], rest[1:]
    return follow(base, rest[0], seen) if rest else base


def follow(m, name, seen):
    """Follow item `name` of module `m` through its re-exports to the defining module."""
    if (id(m), name) in seen:
        return m
    seen.add((id(m), name))
    if name in m.imports:
        return resolve(m, m.imports[name], seen)
    if name in m.defs or name in m.children:
        return m.children.get(name, m)
    sources = [s for s in (resolve(m, g, seen) for g in m.globs) if s is not None]
    for s in sources:
        if name in s.defs or name in s.imports or name in s.children:
            return follow(s, name, seen)
    return follow(sources[0], name, seen) if sources else m


def crate_edges(roots):
    """{module: {dependency: 'file:line' of the first place creating the edge}}."""
    edges = {}
    for root in roots:
        for m in root.walk():
            found = []
            for segs, _glob, pos, public in m.uses:
                if not (public and m.parent is None):  # a crate root's `pub use` is its facade
                    found.append((resolve(m, m.in_file(segs, pos)), pos))
            for p in INLINE_PATH.finditer(m.code):
                segs = re.split(r"\s*::\s*", p.group(1))
                if segs[0] in ("crate", "self", "super") or segs[0] in m.children:
                    found.append((resolve(m, m.in_file(segs, p.start())), p.start()))
            out = edges.setdefault(m, {})
            for target, pos in found:
                if target is not None and target is not m and target not in out:
                    line = m.text.count("\n", 0, pos) + 1
                    out[target] = f"{m.file.relative_to(WORKSPACE)}:{line}"
    return edges


def tarjan(graph):
    """Strongly connected components of `graph` ({node: iterable of nodes})."""
    index, low, stack, sccs = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            at = stack.index(v)
            sccs.append(stack[at:])
            del stack[at:]

    for v in graph:
        if v not in index:
            visit(v)
    return sccs


def main():
    sys.setrecursionlimit(10000)
    crates = sorted(p.parent for p in WORKSPACE.glob("*/Cargo.toml") if (p.parent / "src").is_dir())
    cycles = 0
    for crate in crates:
        roots = [Module(name, crate / "src" / f, None)
                 for name, f in (("crate", "lib.rs"), ("main", "main.rs")) if (crate / "src" / f).is_file()]
        edges = crate_edges(roots)
        for scc in tarjan(edges):
            if len(scc) < 2:
                continue
            cycles += 1
            members = sorted(scc, key=Module.label)
            print(f"{crate.name}: cycle of {len(scc)} modules: {', '.join(m.label() for m in members)}")
            for a in members:
                for b, where in sorted(edges[a].items(), key=lambda e: e[0].label()):
                    if b in scc:
                        print(f"    {a.label()} -> {b.label()}    {where}")
    if cycles:
        print(f"{cycles} module cycle(s) in {len(crates)} crates")
        return 1
    print(f"no module cycles in {len(crates)} crates")
    return 0


WORKSPACE = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()

if __name__ == "__main__":
    sys.exit(main())
