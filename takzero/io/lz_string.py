"""lz-string's URI-safe encoding: :func:`compress_to_encoded_uri_component` and
:func:`decompress_from_encoded_uri_component`, the two functions PTN Ninja uses for the PTN and
the name in its links (:mod:`takzero.io.ptn_ninja`).

The algorithm is lz-string 1.5.0's (Pieroxy, MIT licence, https://github.com/pieroxy/lz-string,
``compressToEncodedURIComponent``/``decompressFromEncodedURIComponent``): an LZW variant whose
codes grow from 2 bits, over the string's UTF-16 code units (as JavaScript sees a string), with
literals of 8 or 16 bits, packed 6 bits per character of the alphabet
``A-Z a-z 0-9 + - $``. The output is byte for byte the JavaScript library's
(``tests/test_ptn_ninja.py`` holds pairs made with it, non-BMP characters included).

Why our own: the PyPI package ``lzstring`` (1.0.4, 2018) needs the Python 2 shim ``future`` and
differs from the JavaScript output for characters outside the Basic Multilingual Plane (it works
on code points, JavaScript on UTF-16 code units).
"""

from __future__ import annotations

__all__ = ["URI_SAFE_ALPHABET", "compress_to_encoded_uri_component", "decompress_from_encoded_uri_component"]

#: The 64 characters of the URI-safe encoding, value 0 first.
URI_SAFE_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-$"
_VALUE = {c: i for i, c in enumerate(URI_SAFE_ALPHABET)}
_BITS_PER_CHAR = 6


def _code_units(text: str) -> list[str]:
    """``text`` as its UTF-16 code units, each a one-character string (lone surrogates kept)."""
    data = text.encode("utf-16-le", "surrogatepass")
    return [chr(data[i] | (data[i + 1] << 8)) for i in range(0, len(data), 2)]


def _from_code_units(units: str) -> str:
    """The inverse of :func:`_code_units`: surrogate pairs joined into one character."""
    return units.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


class _BitWriter:
    """Bits packed most significant first into characters of ``URI_SAFE_ALPHABET``."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.value = 0
        self.position = 0

    def bit(self, b: int) -> None:
        self.value = (self.value << 1) | b
        if self.position == _BITS_PER_CHAR - 1:
            self.position = 0
            self.out.append(URI_SAFE_ALPHABET[self.value])
            self.value = 0
        else:
            self.position += 1

    def bits(self, value: int, n: int) -> None:
        """The ``n`` low bits of ``value``, least significant first (lz-string's order)."""
        for _ in range(n):
            self.bit(value & 1)
            value >>= 1

    def finish(self) -> str:
        while True:  # lz-string pads the last character with zero bits, always one more bit
            self.value <<= 1
            if self.position == _BITS_PER_CHAR - 1:
                self.out.append(URI_SAFE_ALPHABET[self.value])
                break
            self.position += 1
        return "".join(self.out)


def compress_to_encoded_uri_component(text: str) -> str:
    """Compress ``text`` (any str) as lz-string's ``compressToEncodedURIComponent`` does: the
    result uses only ``A-Z a-z 0-9 + - $`` and is never empty (``""`` gives ``"Q"``).
    Raises TypeError if ``text`` is not a str."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    out = _BitWriter()
    dictionary: dict[str, int] = {}
    to_create: set[str] = set()
    dict_size = 3  # codes 0, 1, 2: an 8-bit literal, a 16-bit literal, the end of the stream
    num_bits = 2
    enlarge_in = 2
    w = ""

    def emit(word: str) -> None:
        nonlocal enlarge_in, num_bits
        if word in to_create:
            unit = ord(word[0])
            if unit < 256:
                out.bits(0, num_bits)
                out.bits(unit, 8)
            else:
                out.bits(1, num_bits)
                out.bits(unit, 16)
            enlarge_in -= 1
            if enlarge_in == 0:
                enlarge_in = 1 << num_bits
                num_bits += 1
            to_create.discard(word)
        else:
            out.bits(dictionary[word], num_bits)
        enlarge_in -= 1
        if enlarge_in == 0:
            enlarge_in = 1 << num_bits
            num_bits += 1

    for c in _code_units(text):
        if c not in dictionary:
            dictionary[c] = dict_size
            dict_size += 1
            to_create.add(c)
        wc = w + c
        if wc in dictionary:
            w = wc
            continue
        emit(w)
        dictionary[wc] = dict_size
        dict_size += 1
        w = c
    if w:
        emit(w)
    out.bits(2, num_bits)
    return out.finish()


def decompress_from_encoded_uri_component(data: str) -> str:
    """The text that :func:`compress_to_encoded_uri_component` (or lz-string's JavaScript
    ``compressToEncodedURIComponent``) turned into ``data``. Spaces are read as ``+`` (a ``+``
    decoded from a URL query as a space), as lz-string does.

    Raises ValueError if ``data`` is empty, holds a character outside the alphabet, is cut short
    or is not lz-string output (where the JavaScript library returns null or an empty string).
    """
    data = data.replace(" ", "+")
    if not data:
        raise ValueError("no lz-string data (empty string)")
    bad = sorted({c for c in data if c not in _VALUE})
    if bad:
        raise ValueError(f"not lz-string URI-safe data: characters {''.join(bad)!r}")
    values = [_VALUE[c] for c in data]
    reset = 1 << (_BITS_PER_CHAR - 1)
    pos = {"val": values[0], "mask": reset, "index": 1}

    def read(n: int) -> int:
        bits = 0
        for k in range(n):
            if pos["val"] & pos["mask"]:
                bits |= 1 << k
            pos["mask"] >>= 1
            if pos["mask"] == 0:
                pos["mask"] = reset
                i = pos["index"]
                pos["val"] = values[i] if i < len(values) else 0
                pos["index"] = i + 1
        return bits

    dictionary: list[str] = ["", "", ""]  # codes 0..2 are the literal and end markers
    first = read(2)
    if first == 2:
        return ""
    w = chr(read(8 if first == 0 else 16))
    dictionary.append(w)
    result = [w]
    num_bits = 3
    enlarge_in = 4
    while True:
        if pos["index"] > len(values):
            raise ValueError("lz-string data cut short (no end marker)")
        code = read(num_bits)
        if code == 2:
            return _from_code_units("".join(result))
        if code in (0, 1):
            dictionary.append(chr(read(8 if code == 0 else 16)))
            code = len(dictionary) - 1
            enlarge_in -= 1
        if enlarge_in == 0:
            enlarge_in = 1 << num_bits
            num_bits += 1
        if code < len(dictionary):
            entry = dictionary[code]
        elif code == len(dictionary):
            entry = w + w[0]
        else:
            raise ValueError(f"not lz-string data: code {code} is not in the dictionary")
        result.append(entry)
        dictionary.append(w + entry[0])
        enlarge_in -= 1
        w = entry
        if enlarge_in == 0:
            enlarge_in = 1 << num_bits
            num_bits += 1
