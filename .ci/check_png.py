#!/usr/bin/env python3
"""Checks that PNGs (verbena's figures, a screenshot of the report page)
show a real picture, not a blank or broken one.

Standard library only: the PNG is decoded here (zlib + scanline filters).
A page passes when it is at least MIN_W x MIN_H pixels, has many distinct
colours, enough non-white pixels (figures, text), dark pixels (text, axes)
and saturated pixels (the figures' coloured lines and bars).

usage: check_png.py [--min-size WxH] FILE.png...
"""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {colour}, interlace {interlace})")
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev, at = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[at], bytearray(raw[at + 1:at + 1 + stride])
        at += 1 + stride
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def check(path, min_w, min_h):
    width, height, channels, rows = decode(path)
    colours, non_white, dark, saturated, total = set(), 0, 0, 0, 0
    step = 2 if width * height > 2_000_000 else 1
    for row in rows[::step]:
        for x in range(0, width * channels, channels * step):
            r, g, b = row[x], row[x + 1], row[x + 2]
            colours.add((r, g, b))
            total += 1
            if r < 245 or g < 245 or b < 245:
                non_white += 1
            if r + g + b < 200:
                dark += 1
            if max(r, g, b) - min(r, g, b) > 80:
                saturated += 1
    problems = []
    if width < min_w or height < min_h:
        problems.append(f"{width}x{height} is smaller than {min_w}x{min_h}")
    if len(colours) < 30:
        problems.append(f"only {len(colours)} distinct colours")
    if non_white < 0.02 * total:
        problems.append(f"{100 * non_white / total:.2f} % non-white: blank")
    if dark < 0.001 * total:
        problems.append("no text or axes (no dark pixels)")
    if saturated < 0.001 * total:
        problems.append("no coloured figure marks")
    summary = (f"{path}: {width}x{height}, {len(colours)} colours, {100 * non_white / total:.1f} % ink, "
               f"{100 * dark / total:.2f} % dark, {100 * saturated / total:.2f} % coloured")
    return problems, summary


def main(argv):
    min_w, min_h = 600, 300
    if argv and argv[0] == "--min-size":
        min_w, min_h = (int(v) for v in argv[1].split("x"))
        argv = argv[2:]
    if not argv:
        print(__doc__)
        return 2
    failed = 0
    for path in argv:
        try:
            problems, summary = check(path, min_w, min_h)
        except (OSError, ValueError, zlib.error, TypeError) as error:
            problems, summary = [str(error)], path
        print(("ok   " if not problems else "FAIL ") + summary + ("" if not problems else ": " + "; ".join(problems)))
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
