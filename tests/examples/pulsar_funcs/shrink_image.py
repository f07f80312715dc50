"""Pulsar's thumbnailer, rewritten without PIL: halve a tiny grayscale image.

The input is raw bytes: width, height, then width * height pixels. They are
not UTF-8, so Pulsar's IdentitySerDe hands them over as bytes, and the
bytes returned go out unchanged.
"""

from pulsar import Function


class ShrinkImage(Function):
    def process(self, input, context):
        width, height, pixels = input[0], input[1], input[2:]
        rows = [pixels[y * width : (y + 1) * width] for y in range(0, height, 2)]
        small = b"".join(row[::2] for row in rows)
        return bytes([(width + 1) // 2, (height + 1) // 2]) + small
