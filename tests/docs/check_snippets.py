#!/usr/bin/env python3
"""The C++ a doc quotes must be the C++ that compiles.

A source marks regions with `// [embed:NAME]` ... `// [/embed:NAME]`; a Markdown doc quotes one
with a line `<!-- snippet: NAME -->` followed by a ```cpp block. This checks that every marked
region is quoted, and that each quote is the region, dedented. With --update it rewrites the doc's
quotes from the source instead (what to run after editing the example).

    check_snippets.py SOURCE DOC [--update]
"""
import re
import sys
import textwrap


def regions(source_text):
    found = {}
    for match in re.finditer(r"^[ \t]*// \[embed:(\w+)\]\n(.*?)^[ \t]*// \[/embed:\1\]\n", source_text, re.M | re.S):
        found[match.group(1)] = textwrap.dedent(match.group(2)).rstrip("\n")
    return found


QUOTE = re.compile(r"(<!-- snippet: (\w+) -->\n```cpp\n)(.*?)(^```$)", re.S | re.M)


def main(argv):
    if len(argv) not in (3, 4) or (len(argv) == 4 and argv[3] != "--update"):
        print(__doc__, file=sys.stderr)
        return 2
    source, doc = argv[1], argv[2]
    wanted = regions(open(source, encoding="utf-8").read())
    text = open(doc, encoding="utf-8").read()
    problems, quoted = [], set()

    def replace(match):
        name = match.group(2)
        quoted.add(name)
        if name not in wanted:
            problems.append(f"{doc} quotes snippet {name!r}, which {source} does not mark")
            return match.group(0)
        if match.group(3) != wanted[name] + "\n":
            problems.append(f"{doc}: snippet {name!r} differs from {source}")
        return match.group(1) + wanted[name] + "\n" + match.group(4)

    updated = QUOTE.sub(replace, text)
    problems += [f"{source} marks snippet {name!r}, which {doc} never quotes" for name in wanted if name not in quoted]
    if len(argv) == 4:
        open(doc, "w", encoding="utf-8").write(updated)
        problems = [p for p in problems if "differs" not in p]
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print(f"{len(wanted)} snippets of {source} quoted exactly in {doc}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
