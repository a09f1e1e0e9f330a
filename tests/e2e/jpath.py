#!/usr/bin/env python3
"""Print one value of a JSON document (rove status --json) read from stdin.

usage: jpath.py PATH
PATH is dot-separated steps; a step is a key, optionally followed by
[N] (list index) or [KEY=VALUE] (the list element whose KEY is VALUE):
    peers[name=laptop].drops.spoofed_source
    address[0]
Strings print raw, null as "null", lists and objects as compact JSON.
Exit status 1 (message on stderr) when the path does not exist.
"""
import json
import re
import sys

STEP = re.compile(r'^([^.\[\]]*)((?:\[[^\]]*\])*)$')


def steps(path):
    for part in path.split('.'):
        m = STEP.match(part)
        if m is None:
            raise ValueError('bad path step %r' % part)
        if m.group(1):
            yield ('key', m.group(1))
        for sel in re.findall(r'\[([^\]]*)\]', m.group(2)):
            if '=' in sel:
                k, v = sel.split('=', 1)
                yield ('match', (k, v))
            else:
                yield ('index', int(sel))


def lookup(doc, path):
    cur = doc
    for kind, arg in steps(path):
        if kind == 'key':
            if not isinstance(cur, dict) or arg not in cur:
                raise KeyError(arg)
            cur = cur[arg]
        elif kind == 'index':
            if not isinstance(cur, list) or not -len(cur) <= arg < len(cur):
                raise KeyError('[%d]' % arg)
            cur = cur[arg]
        else:
            k, v = arg
            found = [e for e in cur if isinstance(e, dict) and str(e.get(k)) == v] \
                if isinstance(cur, list) else []
            if not found:
                raise KeyError('[%s=%s]' % (k, v))
            cur = found[0]
    return cur


def show(v):
    if v is None:
        return 'null'
    if isinstance(v, bool):
        return 'true' if v else 'false'
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(v, separators=(',', ':'))


def main():
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    try:
        doc = json.load(sys.stdin)
    except ValueError as e:
        sys.stderr.write('jpath: input is not JSON: %s\n' % e)
        return 1
    try:
        print(show(lookup(doc, sys.argv[1])))
    except (KeyError, ValueError) as e:
        sys.stderr.write('jpath: %s: no %s\n' % (sys.argv[1], e))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
