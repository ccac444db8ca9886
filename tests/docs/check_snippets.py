#!/usr/bin/env python3
"""The code a doc quotes must be the code that builds and runs.

A source marks regions with `// [embed:NAME]` ... `// [/embed:NAME]` (`#` instead of `//` in CMake
and Python; a .json source, which cannot hold a comment, is one region named by its file's stem); a Markdown doc quotes one with a line `<!-- snippet: NAME -->` followed by a fenced
block (```cpp, ```cmake, ```python). This checks that every marked region is quoted, that each
quote is the region, dedented, and that the doc has no ```cpp or ```cmake block that is not a
quote: what a reader copies is what the suite compiles.

    check_snippets.py DOC SOURCE... [--update | --assemble DIR]

--update rewrites the doc's quotes from the sources (what to run after editing the example).
--assemble writes the quotes alone, in the doc's order, into DIR, each source's quotes into a file
of that source's name: the project a reader gets by following the doc literally.
"""
import os
import re
import sys
import textwrap

REGION = re.compile(r"^[ \t]*(?://|#) \[embed:(\w+)\]\n(.*?)^[ \t]*(?://|#) \[/embed:\1\]\n", re.M | re.S)
QUOTE = re.compile(r"(<!-- snippet: (\w+) -->\n```(\w+)\n)(.*?)(^```$)", re.S | re.M)
CHECKED_BLOCK = re.compile(r"^```(cpp|cmake)$", re.M)


def regions(sources):
    found = {}
    for source in sources:
        text = open(source, encoding="utf-8").read()
        if source.endswith(".json"):
            # JSON has no comments: a .json source is one region, named by its file's stem.
            found[os.path.splitext(os.path.basename(source))[0]] = (source, text.rstrip("\n"))
            continue
        for match in REGION.finditer(text):
            found[match.group(1)] = (source, textwrap.dedent(match.group(2)).rstrip("\n"))
    return found


def main(argv):
    args = argv[1:]
    mode, assemble_dir = "check", None
    if "--update" in args:
        mode = "update"
        args.remove("--update")
    if "--assemble" in args:
        at = args.index("--assemble")
        if at + 1 >= len(args):
            print(__doc__, file=sys.stderr)
            return 2
        mode, assemble_dir = "assemble", args[at + 1]
        del args[at:at + 2]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    doc, sources = args[0], args[1:]
    wanted = regions(sources)
    text = open(doc, encoding="utf-8").read()
    problems, quoted, assembled = [], set(), {}

    def replace(match):
        name = match.group(2)
        quoted.add(name)
        if name not in wanted:
            problems.append(f"{doc} quotes snippet {name!r}, which no source marks")
            return match.group(0)
        source, region = wanted[name]
        if match.group(4) != region + "\n":
            problems.append(f"{doc}: snippet {name!r} differs from {source}")
        assembled.setdefault(os.path.basename(source), []).append(match.group(4))
        return match.group(1) + region + "\n" + match.group(5)

    updated = QUOTE.sub(replace, text)
    problems += [f"{source} marks snippet {name!r}, which {doc} never quotes"
                 for name, (source, _) in wanted.items() if name not in quoted]
    quote_starts = {match.start(3) - 3 for match in QUOTE.finditer(text)}
    for block in CHECKED_BLOCK.finditer(text):
        if block.start() not in quote_starts:
            line = text.count("\n", 0, block.start()) + 1
            problems.append(f"{doc}:{line}: a ```{block.group(1)} block that quotes no snippet (mark it and quote a source)")
    if mode == "update":
        open(doc, "w", encoding="utf-8").write(updated)
        problems = [p for p in problems if "differs" not in p]
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    if mode == "assemble":
        os.makedirs(assemble_dir, exist_ok=True)
        for name, quotes in assembled.items():
            open(os.path.join(assemble_dir, name), "w", encoding="utf-8").write("\n".join(quotes))
        print(f"{len(wanted)} snippets of {len(sources)} sources assembled in {assemble_dir}: {', '.join(sorted(assembled))}")
    else:
        print(f"{len(wanted)} snippets of {len(sources)} sources quoted exactly in {doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
