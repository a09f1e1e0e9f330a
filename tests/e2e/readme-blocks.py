"""The worked example of README.md, as test-readme.sh runs it.

usage: readme-blocks.py README OUTDIR

Reads the blocks between "<!-- worked example" and "<!-- end of worked
example -->": a fenced block whose info string is "sh on=HOST" holds
commands to run on HOST, one per line; "ini file=HOST:PATH" holds the
contents of a file HOST keeps at PATH. Each step ("**N. ...**") is
numbered. Writes OUTDIR/NN.kind (NN in the README's order, kind "sh" or
"file"), each holding the step's number on its first line, the host on
the second, the path (files) on the third, then the block; prints "STEPS
BLOCKS COMMANDS". Fails when the markers or a block's host are missing.
"""
import os
import re
import sys


def main():
    readme, out = sys.argv[1:3]
    text = open(readme).read()
    start = text.find("<!-- worked example")
    end = text.find("<!-- end of worked example -->")
    if start < 0 or end < start:
        sys.exit("readme-blocks: the worked example's markers are missing")
    part = text[start:end]
    step = 0
    blocks = []
    lines = part.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"\*\*(\d+)\. ", lines[i])
        if m:
            step = int(m.group(1))
        fence = re.match(r"```(\w+)\s+(\S+)\s*$", lines[i])
        if fence:
            body = []
            i += 1
            while i < len(lines) and lines[i] != "```":
                body.append(lines[i])
                i += 1
            lang, tag = fence.groups()
            if lang == "sh" and tag.startswith("on="):
                blocks.append(("sh", step, tag[3:], "", body))
            elif lang == "ini" and tag.startswith("file=") and ":" in tag:
                host, path = tag[5:].split(":", 1)
                blocks.append(("file", step, host, path, body))
            else:
                sys.exit("readme-blocks: block '%s %s' names no host" % (lang, tag))
        i += 1
    os.makedirs(out, exist_ok=True)
    commands = 0
    for n, (kind, st, host, path, body) in enumerate(blocks):
        if kind == "sh":
            commands += sum(1 for b in body if b.strip() and not b.startswith("#"))
        with open(os.path.join(out, "%02d.%s" % (n, kind)), "w") as f:
            f.write("%d\n%s\n%s\n" % (st, host, path))
            f.write("\n".join(body) + "\n")
    print(step, len(blocks), commands)


main()
