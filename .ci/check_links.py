#!/usr/bin/env python3
"""Check the docs' relative links: README.md and docs/**/*.md.

Every relative markdown link (inline `[text](target)`, images, and reference
definitions `[id]: target`) must name an existing file or directory, and a
`#fragment` on a markdown target must name one of its headings, slugged as
GitHub does. External links (http, https, mailto) are skipped, and so is
everything inside code: fenced blocks and `inline code`.

Prints each broken link as FILE:LINE: TARGET (why) and exits 1 if there is
one; otherwise prints `links: N checked, 0 broken` and exits 0.
Python 3 standard library only. Run from anywhere: paths are relative to the
repository root (this script's parent's parent).
"""

import os
import re
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
INLINE_CODE = re.compile(r"(`+)([\s\S]+?)\1")
# [text](target) or ![alt](target); text may hold one level of brackets.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+[\"'(][^)]*)?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def markdown_files():
    files = [os.path.join(ROOT, "README.md")]
    for directory, _, names in os.walk(os.path.join(ROOT, "docs")):
        files += [os.path.join(directory, n) for n in names if n.endswith(".md")]
    return sorted(f for f in files if os.path.isfile(f))


def prose_lines(path, with_breaks=False):
    """(line number, text) of each line outside fenced code blocks; with
    with_breaks, (line number, None) for each fence line, which ends a
    paragraph."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            match = FENCE.match(line)
            if fence is None and match:
                fence = match.group(1)
            elif fence is not None:
                if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                    fence = None
            else:
                yield number, line
                continue
            if with_breaks:
                yield number, None


def paragraphs(path):
    """(first line number, lines) of each run of non-blank prose lines, so
    that a link wrapped over two lines is still one link."""
    start, lines = None, []
    for number, line in prose_lines(path, with_breaks=True):
        if line is None or not line.strip():
            if lines:
                yield start, lines
            start, lines = None, []
        else:
            if not lines:
                start = number
            lines.append(line)
    if lines:
        yield start, lines


def heading_text(raw):
    """A heading's text as GitHub renders it: no markup, links as their text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    text = INLINE_CODE.sub(lambda m: m.group(2).strip(), text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("*", "")


def slug(text):
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to '-'."""
    kept = []
    for ch in text.strip().lower():
        category = unicodedata.category(ch)
        if ch in " -_" or category[0] in "LNM" or category == "Pc":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


_anchors = {}


def anchors(path):
    """The anchors a markdown file defines: its headings' slugs (with GitHub's
    -1, -2 suffixes for repeats) and explicit <a name|id="...">."""
    if path not in _anchors:
        found, seen = set(), {}
        for _, line in prose_lines(path):
            match = HEADING.match(line)
            if match:
                base = slug(heading_text(match.group(2)))
                count = seen.get(base, 0)
                seen[base] = count + 1
                found.add(base if count == 0 else f"{base}-{count}")
            found.update(HTML_ANCHOR.findall(line))
        _anchors[path] = found
    return _anchors[path]


def links(path):
    """(line number, target) of every link in the file's prose."""
    for start, lines in paragraphs(path):
        for offset, line in enumerate(lines):
            match = REFERENCE_DEF.match(line)
            if match:
                yield start + offset, match.group(1)
        # Code spans blanked out (newlines kept), so offsets map to lines.
        text = INLINE_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), "\n".join(lines))
        for match in INLINE_LINK.finditer(text):
            yield start + text.count("\n", 0, match.start()), match.group(1)


def problem(source, target):
    """Why a link is broken, or None."""
    target = target.strip("<>")
    path_part, _, fragment = target.partition("#")
    if path_part:
        resolved = os.path.normpath(os.path.join(os.path.dirname(source), path_part))
        if not os.path.exists(resolved):
            return "no such file"
    else:
        resolved = source
    if fragment and resolved.endswith(".md") and os.path.isfile(resolved):
        if fragment.lower() not in anchors(resolved):
            return f"no heading #{fragment} in {os.path.relpath(resolved, ROOT)}"
    return None


def main():
    checked, broken = 0, 0
    for path in markdown_files():
        for number, target in links(path):
            if EXTERNAL.match(target.strip("<>")):
                continue
            checked += 1
            why = problem(path, target)
            if why:
                broken += 1
                print(f"{os.path.relpath(path, ROOT)}:{number}: {target} ({why})")
    print(f"links: {checked} checked, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
