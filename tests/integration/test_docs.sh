# The repository stands alone: no file points into the workspace around
# the clone (its shared folder is not in a clone), every relative link in
# the Markdown docs reaches a file of the repository, and docs/RECORDING.md's
# column table is the bundled recordings' header, column for column.
source "$(dirname "$0")/lib.sh"
: "${GPULSE_SOURCE_DIR:?}"

python3 - "$GPULSE_SOURCE_DIR" <<'PY' || fail "docs"
import os, re, sys
root = sys.argv[1]
me = os.path.join(root, "tests", "integration", "test_docs.sh")
# Spelled in pieces so that this file does not match itself.
outside = [re.compile(p) for p in (r"\.\./" + "shared", r"\b" + "shared/" + r"(data|DESIGN|STYLE)")]
bad = []
for top in ("README.md", "HACKING.md", "docs", "src", "tests", "bench", "scripts", "deploy", "etc", "fuzz",
            "Makefile", "CMakeLists.txt"):
    path = os.path.join(root, top)
    files = [path] if os.path.isfile(path) else [
        os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
    for f in files:
        if os.path.samefile(f, me) or "/corpus/" in f:
            continue
        try:
            text = open(f, encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if any(p.search(line) for p in outside):
                bad.append(f"{os.path.relpath(f, root)}:{n}: {line.strip()}")
assert not bad, "references outside the repository:\n" + "\n".join(bad)

# Relative links of the Markdown docs reach files of the repository.
md = [os.path.join(root, "README.md"), os.path.join(root, "HACKING.md")] + [
    os.path.join(d, f) for d, _, fs in os.walk(os.path.join(root, "docs")) for f in fs
    if f.endswith(".md")]
broken = []
for f in md:
    for n, line in enumerate(open(f, encoding="utf-8"), 1):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            p = os.path.normpath(os.path.join(os.path.dirname(f), target.split("#")[0]))
            if not p.startswith(root + os.sep) or not os.path.exists(p):
                broken.append(f"{os.path.relpath(f, root)}:{n}: {target}")
assert not broken, "broken links:\n" + "\n".join(broken)

# The recording format's column table, in order, is the bundled header.
doc = open(os.path.join(root, "docs", "RECORDING.md"), encoding="utf-8").read()
table = doc.split("## Columns of the sample file", 1)[1].split("\n\n", 2)[1]
cols = []
for row in table.splitlines()[2:]:
    cols += [c.strip() for c in row.split("|")[1].split(",")]
for rec in ("h200-phases-10hz.csv", "h200-mixed-10hz.csv"):
    head = open(os.path.join(root, "data", "recordings", rec)).readline().strip().split(",")
    assert cols == head, (rec, cols, head)
design = open(os.path.join(root, "docs", "DESIGN.md"), encoding="utf-8").read()
assert len(re.findall(r"^\d\. \*\*", design, re.M)) == 9, "docs/DESIGN.md lacks its nine decisions"
PY
echo PASS
