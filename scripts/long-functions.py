#!/usr/bin/env python3
"""The longest functions in the C++ sources, by brace matching.

Usage: scripts/long-functions.py [-n N] [--min LINES] [--no-tests] [PATH...]
  PATH: files or folders (default src/); reads *.cc and *.h.
Prints "LINES  FILE:LINE  NAME", longest first. A function's length runs from the line
of its name to its closing brace. Lambdas and local classes count toward the function
that holds them; inline member functions in a class body count on their own.

Not a C++ parser: comments, strings, raw strings and character literals are blanked
first, then each '{' at namespace or class scope is classed by the text before it (a
header with a top-level '(' that is not an initializer is a function; namespace, class,
struct, union, enum open a scope to look inside; anything else, such as a table's
initializer, is skipped whole). Good enough to find what grew; check a surprise by eye.
"""

import argparse
import os
import re
import sys

SCOPE_WORDS = re.compile(r"\b(namespace|class|struct|union|enum)\b|\bextern\s*\"")


def blank(text):
    """The text with comments, strings and char literals replaced by spaces
    (newlines kept, so line numbers hold)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (
                text[i - 1].isalnum() or text[i - 1] == "_")) or (
                c in "uUL8" and re.match(r'(u8|u|U|L)R"', text[i:i + 4]) and (
                    i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))):
            q = text.find('"', i)
            paren = text.find("(", q)
            delim = text[q + 1:paren]
            end = text.find(")" + delim + '"', paren)
            j = n if end < 0 else end + len(delim) + 2
            out.append('"' + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + '"')
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            # A quote after a digit or letter is a digit separator (1'000), not a literal.
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * max(0, j - i - 2) + (c if j - i >= 2 else ""))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def function_name(header):
    """The name in a function's header: the words before its first top-level '('."""
    header = re.sub(r"\s+", " ", header).strip()
    header = re.sub(r"^template\s*<[^{;]*?>\s*", "", header)
    depth = 0
    for k, ch in enumerate(header):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            m = re.search(r"([~\w:]+(?:operator\s*\S+?)?)\s*$", header[:k])
            name = m.group(1) if m else header[:k].strip()
            if re.fullmatch(r"[A-Z][A-Z0-9_]*", name.split("::")[-1]):
                # A macro such as TEST(Suite, Name): its arguments name it.
                close = header.find(")", k)
                return name + header[k:close + 1]
            return name
    return header[:60]


def is_function(header):
    h = re.sub(r"\s+", " ", header).strip()
    if not h or "(" not in h:
        return False
    # `T x = {...}` / `auto f = [] {` at namespace scope: an initializer, not a body.
    before_paren = h[:h.find("(")]
    if "=" in before_paren.replace("operator=", "").replace("==", ""):
        return False
    if SCOPE_WORDS.search(before_paren) and not re.search(r"\)\s*[\w\s]*$", h):
        return False
    return True


def functions(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = blank(f.read())
    found = []
    line = 1
    # Scope stack: "scope" (namespace/class: look inside) or "skip" (function bodies,
    # initializers: braces counted only).
    stack = []
    header_start = 0
    i, n = 0, len(text)
    func_open = None  # (name, start line) of the function whose body is open
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif c == "{":
            if not stack or stack[-1] == "scope":
                header = text[header_start:i]
                if is_function(header):
                    name = function_name(header)
                    lead = len(header) - len(header.lstrip())
                    first = line - header[lead:].count("\n")
                    name_at = header.find(name.split("(")[0].split("::")[-1])
                    if name_at >= 0:
                        first = line - header[name_at:].count("\n")
                    func_open = (name, first, len(stack))
                    stack.append("skip")
                elif SCOPE_WORDS.search(header) and not re.search(r"=\s*$", header):
                    stack.append("scope")
                else:
                    stack.append("skip")
            else:
                stack.append("skip")
            header_start = i + 1
        elif c == "}":
            if stack:
                stack.pop()
            if func_open and len(stack) == func_open[2]:
                found.append((line - func_open[1] + 1, path, func_open[1], func_open[0]))
                func_open = None
            header_start = i + 1
        elif c == ";" and (not stack or stack[-1] == "scope"):
            header_start = i + 1
        elif c == ":" and (not stack or stack[-1] == "scope"):
            # `public:` and friends end a header; `::` and ctor initializers do not.
            word = re.search(r"\b(public|private|protected)\s*$", text[header_start:i])
            if word and text[i + 1:i + 2] != ":":
                header_start = i + 1
        elif c == "#" and (i == 0 or text[i - 1] == "\n" or text[:i].rstrip(" \t").endswith("\n")):
            # A preprocessor line (with its continuations) is no part of a header.
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] == "\\":
                    j = k + 1
                    continue
                break
            line += text[i:k].count("\n")
            i = k
            if not stack or stack[-1] == "scope":
                header_start = k
            continue
        i += 1
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", default=["src"])
    ap.add_argument("-n", type=int, default=20, help="how many to print (0: all)")
    ap.add_argument("--min", type=int, default=0, help="only those of at least LINES")
    ap.add_argument("--no-tests", action="store_true", help="skip *_test.cc")
    args = ap.parse_args()
    files = []
    for p in args.paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                files += [os.path.join(root, f) for f in names if f.endswith((".cc", ".h"))]
        else:
            files.append(p)
    rows = []
    for f in sorted(files):
        if args.no_tests and f.endswith("_test.cc"):
            continue
        rows += functions(f)
    rows.sort(key=lambda r: (-r[0], r[1], r[2]))
    rows = [r for r in rows if r[0] >= args.min]
    if args.n:
        rows = rows[:args.n]
    for length, path, start, name in rows:
        print(f"{length:5d}  {path}:{start}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
