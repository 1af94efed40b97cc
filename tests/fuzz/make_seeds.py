#!/usr/bin/env python3
"""Writes the seed corpus of the codec's fuzz targets (tests/fuzz/corpus/<target>/<name>).

The seeds are committed; run this again only to change them. Packets are written out from the
byte layouts of the MQTT 5.0 standard, without the codec. Regression inputs that a fuzz run found
are committed by hand next to these (named regression-*), and this script leaves them alone.
"""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def vbi(n):
    out = bytearray()
    while True:
        digit, n = n % 128, n // 128
        out.append(digit | (0x80 if n else 0))
        if not n:
            return bytes(out)


def s16(text):
    data = text.encode() if isinstance(text, str) else text
    return struct.pack(">H", len(data)) + data


def props(*parts):
    content = b"".join(parts)
    return vbi(len(content)) + content


def packet(first, *parts):
    body = b"".join(parts)
    return bytes([first]) + vbi(len(body)) + body


def user(key, value):
    return b"\x26" + s16(key) + s16(value)


def u16(n):
    return struct.pack(">H", n)


def u32(n):
    return struct.pack(">I", n)


CONNACK_ALL = packet(0x20, b"\x01\x00", props(
    b"\x11" + u32(120), b"\x21" + u16(20), b"\x24\x01", b"\x25\x00", b"\x27" + u32(4096),
    b"\x12" + s16("cid"), b"\x22" + u16(10), b"\x1f" + s16("ok"), user("a", "1"), b"\x28\x00",
    b"\x29\x01", b"\x2a\x00", b"\x13" + u16(30), b"\x1a" + s16("resp"), b"\x1c" + s16("srv"),
    b"\x15" + s16("SCRAM"), b"\x16" + s16(b"\x01\x02"), user("b", "2")))
PUBLISH_ALL = packet(0x3A, s16("r/1"), u16(7), props(
    b"\x01\x01", b"\x02" + u32(60), b"\x23" + u16(5), b"\x08" + s16("reply/to"),
    b"\x09" + s16(b"\xab\xcd"), user("x", "y"), b"\x0b\x01", b"\x0b\xff\xff\xff\x7f",
    b"\x03" + s16("application/json")), b"{\"jsonrpc\":\"2.0\"}")
PUBLISH_QOS0 = packet(0x31, s16("a/b"), b"\x00", b"hello")
PUBLISH_QOS2 = packet(0x34, s16("caf\u00e9/\u20ac"), u16(0xFFFF), props(user("k", "v")), b"x")
ALIAS_DEFINE = packet(0x30, s16("long/topic/name"), props(b"\x23" + u16(1)), b"1")
ALIAS_USE = packet(0x30, s16(""), props(b"\x23" + u16(1)), b"2")
PUBACK = bytes.fromhex("40 02 12 34")
PUBREC = bytes.fromhex("50 03 00 01 10")
PUBREL = packet(0x62, u16(2), b"\x92", props(b"\x1f" + s16("gone"), user("k", "v")))
PUBCOMP = bytes.fromhex("70 04 00 03 00 00")
SUBACK = packet(0x90, u16(10), props(b"\x1f" + s16("partly")),
                bytes.fromhex("00 01 02 80 83 87 8F 91 97 9E A1 A2"))
UNSUBACK = packet(0xB0, u16(11), props(user("k", "v")), bytes.fromhex("00 11 80 83 87 8F 91"))
PINGRESP = bytes.fromhex("D0 00")
DISCONNECT = packet(0xE0, b"\x9c", props(b"\x1f" + s16("moving"), b"\x1c" + s16("other:1883"),
                                         user("k", "v")))
AUTH = packet(0xF0, b"\x18", props(b"\x15" + s16("SCRAM-SHA-1"), b"\x16" + s16(b"\x01\x02"),
                                   b"\x1f" + s16("more"), user("k", "v")))

# First byte of a stream seed: Maximum Packet Size 2^(high nibble) or none, Topic Alias Maximum
# (low nibble, 15: 300).
NO_LIMIT = b"\x0a"
LIMITS = b"\xcf"

STREAM = {
    "connack-all-properties": NO_LIMIT + CONNACK_ALL,
    "connack-refused": NO_LIMIT + bytes.fromhex("20 03 00 87 00"),
    "connack-mqtt311": NO_LIMIT + bytes.fromhex("20 02 00 05"),
    "publish-qos0": NO_LIMIT + PUBLISH_QOS0,
    "publish-qos1-all-properties": NO_LIMIT + PUBLISH_ALL,
    "publish-qos2-utf8": LIMITS + PUBLISH_QOS2,
    "publish-alias-define-and-use": NO_LIMIT + ALIAS_DEFINE + ALIAS_USE + ALIAS_USE,
    "publish-alias-undefined": NO_LIMIT + ALIAS_USE,
    "publish-alias-300": LIMITS + packet(0x30, s16("t"), props(b"\x23" + u16(300))) +
                         packet(0x30, s16(""), props(b"\x23" + u16(300))) +
                         packet(0x30, s16(""), props(b"\x23" + u16(301))),
    "acks": NO_LIMIT + PUBACK + PUBREC + PUBREL + PUBCOMP,
    "suback-unsuback": NO_LIMIT + SUBACK + UNSUBACK,
    "pingresp": NO_LIMIT + PINGRESP,
    "disconnect": NO_LIMIT + DISCONNECT,
    "disconnect-short": NO_LIMIT + bytes.fromhex("E0 00"),
    "auth": NO_LIMIT + AUTH,
    "session": LIMITS + CONNACK_ALL + SUBACK + ALIAS_DEFINE + PUBLISH_ALL + ALIAS_USE + PUBREL +
               PINGRESP + UNSUBACK + DISCONNECT,
    # Nasty ones.
    "remaining-length-5-bytes": NO_LIMIT + bytes.fromhex("30 80 80 80 80 01"),
    "remaining-length-not-shortest": NO_LIMIT + bytes.fromhex("D0 80 00"),
    "remaining-length-largest": NO_LIMIT + bytes.fromhex("30 FF FF FF 7F 00 01 74 00"),
    "too-large-for-limit": b"\x40" + PUBLISH_ALL,
    "type-0": NO_LIMIT + bytes.fromhex("00 00"),
    "connect-from-broker": NO_LIMIT + packet(0x10, s16("MQTT"), b"\x05\x02\x00\x00\x00", s16("")),
    "publish-qos3": NO_LIMIT + packet(0x36, s16("t"), u16(1), b"\x00"),
    "publish-dup-qos0": NO_LIMIT + packet(0x38, s16("t"), b"\x00"),
    "publish-id-0": NO_LIMIT + packet(0x32, s16("t"), u16(0), b"\x00"),
    "publish-wildcard": NO_LIMIT + packet(0x30, s16("a/+/#"), b"\x00"),
    "publish-bad-utf8": NO_LIMIT + packet(0x30, s16(b"\xed\xa0\x80\xc0\x80"), b"\x00"),
    "publish-nul": NO_LIMIT + packet(0x30, s16(b"a\x00b"), b"\x00"),
    "property-twice": NO_LIMIT + packet(0x30, s16("t"), props(b"\x23" + u16(1), b"\x23" + u16(1))),
    "property-not-allowed": NO_LIMIT + packet(0x40, u16(1), b"\x00", props(b"\x11" + u32(1))),
    "property-length-past-end": NO_LIMIT + bytes.fromhex("20 05 00 00 09 21 00"),
    "property-value-past-block": NO_LIMIT + bytes.fromhex("20 06 00 00 02 27 00 00"),
    "subscription-id-0": NO_LIMIT + packet(0x30, s16("t"), props(b"\x0b\x00")),
    "subscription-id-5-bytes": NO_LIMIT + packet(0x30, s16("t"), props(b"\x0b\x80\x80\x80\x80\x01")),
    "receive-maximum-0": NO_LIMIT + packet(0x20, b"\x00\x00", props(b"\x21" + u16(0))),
    "connack-flags": NO_LIMIT + bytes.fromhex("20 03 02 00 00"),
    "pubrel-flags": NO_LIMIT + bytes.fromhex("60 02 00 01"),
    "suback-empty": NO_LIMIT + bytes.fromhex("90 03 00 01 00"),
    "pingresp-body": NO_LIMIT + bytes.fromhex("D0 01 00"),
    "disconnect-session-expiry": NO_LIMIT + packet(0xE0, b"\x00", props(b"\x11" + u32(0))),
    "auth-no-method": NO_LIMIT + packet(0xF0, b"\x18", props(b"\x16" + s16("d"))),
    "trailing-bytes": NO_LIMIT + bytes.fromhex("40 05 00 01 00 00 00"),
    "cut-short": NO_LIMIT + PUBLISH_ALL[: len(PUBLISH_ALL) // 2],
}

PRIMITIVES = {
    "varint-0": b"\x00",
    "varint-127": b"\x7f",
    "varint-128": b"\x80\x01",
    "varint-16383": b"\xff\x7f",
    "varint-16384": b"\x80\x80\x01",
    "varint-2097151": b"\xff\xff\x7f",
    "varint-2097152": b"\x80\x80\x80\x01",
    "varint-268435455": b"\xff\xff\xff\x7f",
    "varint-5-bytes": b"\x80\x80\x80\x80\x01",
    "varint-not-shortest": b"\x80\x00",
    "utf8-ascii": b"sport/tennis/player1/ranking",
    "utf8-all-lengths": "a\u00e9\u0800\ud7ff\ue000\uffff\U00010000\U0010ffff/x".encode(),
    "utf8-offsets": b"abcdefg\xc3\xa9hijklm\xe2\x82\xacnopqrs\xf0\x9f\x98\x80tuvwxyz",
    "utf8-overlong": b"abcdefgh\xc0\x80\xe0\x80\x80\xf0\x80\x80\x80",
    "utf8-surrogate": b"abcdefgh\xed\xa0\x80",
    "utf8-above-10ffff": b"\xf4\x90\x80\x80",
    "utf8-cut": b"abcdefgh\xe2\x82",
    "utf8-nul": b"abcdefgh\x00abcdefgh",
    "topic-wildcards": b"sport/+/player/#",
}


def write(target, seeds):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


def main():
    write("codec_stream", STREAM)
    write("codec_primitives", PRIMITIVES)
    # FuzzedDataProvider reads fields from both ends of its input: seeds of plain random bytes
    # (fixed seed) give it something to start from.
    rng = random.Random(5)
    write("codec_roundtrip",
          {f"random-{i}": bytes(rng.randrange(256) for _ in range(64 << (i % 4)))
           for i in range(8)})


if __name__ == "__main__":
    main()
