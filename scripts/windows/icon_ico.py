"""Writes icons/icon.ico (the Windows executable's and installer's icon) from the PNG icons.

An ICO may hold PNG images (Windows Vista and later read them), so no image library is
needed: a header, one entry per size, then the PNG files as they are.
Run from the repository's root: python3 scripts/windows/icon_ico.py
"""

import struct

SIZES = [("icons/32x32.png", 32), ("icons/128x128.png", 128), ("icons/128x128@2x.png", 256)]


def main() -> None:
    images = [open(path, "rb").read() for path, _ in SIZES]
    out = struct.pack("<HHH", 0, 1, len(SIZES))
    offset = 6 + 16 * len(SIZES)
    for (_, size), image in zip(SIZES, images):
        side = 0 if size >= 256 else size  # 0 means 256
        out += struct.pack("<BBBBHHII", side, side, 0, 0, 1, 32, len(image), offset)
        offset += len(image)
    with open("icons/icon.ico", "wb") as ico:
        ico.write(out + b"".join(images))


if __name__ == "__main__":
    main()
