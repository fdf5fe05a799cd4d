#!/usr/bin/env python3
"""Write every include of a project header with its folder.

src/ is the one include root of every library (CMakeLists.txt,
cmake/layers.cmake), so a header of src/ is named from there:
`#include "store/tsdb.h"`, also from a file in the same folder. This
rewrites the bare form (`#include "tsdb.h"`) in src/, tests/, bench/ and
fuzz/ wherever the name is one header of src/; run it after adding code
written the old way. Idempotent; prints the files it changed.
tests/data/ is left alone: its programs are built against the revision
that made each fixture.

    scripts/include-folders.py [ROOT]
"""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
src = os.path.join(root, "src")

headers = {}
for d, _, files in os.walk(src):
    for f in files:
        if f.endswith(".h"):
            rel = os.path.relpath(os.path.join(d, f), src)
            headers.setdefault(f, []).append(rel)

inc = re.compile(r'^(\s*#\s*include\s*)"([^"/]+)"')
changed = 0
for top in ("src", "tests", "bench", "fuzz"):
    for d, _, files in os.walk(os.path.join(root, top)):
        if os.path.relpath(d, root).startswith(os.path.join("tests", "data")):
            continue
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(d, f)
            with open(path, encoding="utf-8") as fh:
                lines = fh.read().split("\n")
            out = []
            for line in lines:
                m = inc.match(line)
                if m and m.group(2) in headers:
                    where = headers[m.group(2)]
                    here = os.path.relpath(os.path.join(d, m.group(2)), src)
                    if here in where:       # the same folder's header
                        target = here
                    elif len(where) == 1:
                        target = where[0]
                    else:
                        sys.exit(f"{path}: {m.group(2)} is ambiguous: {', '.join(where)}")
                    line = m.group(1) + '"' + target + '"' + line[m.end():]
                out.append(line)
            if out != lines:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write("\n".join(out))
                print(os.path.relpath(path, root))
                changed += 1
print(f"{changed} files rewritten", file=sys.stderr)
