#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""tests/helpers/tfevents_read.py - an independent reader of TensorBoard event files, written
from the format's description (TFRecord framing; tensorflow/core/util/event.proto and
summary.proto), not from ddptrain's writer, and with nothing but the standard library:

    record = uint64 length | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
    masked_crc32c(x) = ((crc >> 15 | crc << 17) + 0xa282ead8) mod 2^32
    Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
    Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }

Every record's two CRCs are checked with this file's own CRC-32C (bit by bit, no table); the
protobuf is decoded by hand (every wire type, unknown fields skipped). A file must start with
the file_version event "brain.Event:2" and hold nothing after its last whole record.

    tfevents_read.py FILE...       prints "# file PATH" then one line per scalar: TAG STEP VALUE
                                   (VALUE as Python's repr of the float32); exit 1 with one line
                                   on stderr naming the file and the record that is wrong
    tfevents_read.py --crc TEXT    prints the CRC-32C of TEXT's UTF-8 bytes as 8 hex digits
Imported: read_events(path) -> [{"wall_time", "step", "file_version", "scalars": [(tag, value)]}]
"""
import struct
import sys


class FormatError(Exception):
    pass


def crc32c(data):
    """CRC-32C (Castagnoli): reflected polynomial 0x82F63B78, initial and final XOR 0xFFFFFFFF."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, pos):
    value, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise FormatError("varint runs past the end of its message")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise FormatError("varint longer than 10 bytes")


def fields(buf):
    """(field number, wire type, value) of a message: an int for varints, bytes otherwise."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise FormatError("field number 0")
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise FormatError("wire type %d" % wire)
        if pos > len(buf):
            raise FormatError("field %d runs past the end of its message" % number)
        yield number, wire, value


def expect(wire, want, what):
    if wire != want:
        raise FormatError("%s has wire type %d, not %d" % (what, wire, want))


def decode_value(buf):
    tag, value = None, None
    for number, wire, v in fields(buf):
        if number == 1:
            expect(wire, 2, "Value.tag")
            tag = v.decode("utf-8")
        elif number == 2:
            expect(wire, 5, "Value.simple_value")
            value = struct.unpack("<f", v)[0]
    if tag is None or value is None:
        raise FormatError("a Value without tag or simple_value")
    return tag, value


def decode_event(buf):
    ev = {"wall_time": None, "step": 0, "file_version": None, "scalars": []}
    for number, wire, v in fields(buf):
        if number == 1:
            expect(wire, 1, "Event.wall_time")
            ev["wall_time"] = struct.unpack("<d", v)[0]
        elif number == 2:
            expect(wire, 0, "Event.step")
            ev["step"] = v - (1 << 64) if v >= 1 << 63 else v   # int64: two's complement
        elif number == 3:
            expect(wire, 2, "Event.file_version")
            ev["file_version"] = v.decode("utf-8")
        elif number == 5:
            expect(wire, 2, "Event.summary")
            for n2, w2, v2 in fields(v):
                if n2 == 1:
                    expect(w2, 2, "Summary.value")
                    ev["scalars"].append(decode_value(v2))
    if ev["wall_time"] is None:
        raise FormatError("an Event without wall_time")
    return ev


def read_events(path):
    with open(path, "rb") as f:
        data = f.read()
    events, pos, index = [], 0, 0
    while pos < len(data):
        where = "%s: record %d at byte %d" % (path, index, pos)
        if len(data) - pos < 12:
            raise FormatError("%s: %d bytes left, too few for a record's header" % (where, len(data) - pos))
        head = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", head)
        (head_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if masked(crc32c(head)) != head_crc:
            raise FormatError("%s: the length's CRC does not match" % where)
        if len(data) - pos - 12 < length + 4:
            raise FormatError("%s: a length of %d runs past the end of the file" % (where, length))
        body = data[pos + 12:pos + 12 + length]
        (body_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if masked(crc32c(body)) != body_crc:
            raise FormatError("%s: the data's CRC does not match" % where)
        try:
            ev = decode_event(body)
        except (FormatError, UnicodeDecodeError) as e:
            raise FormatError("%s: %s" % (where, e))
        if index == 0 and ev["file_version"] != "brain.Event:2":
            raise FormatError("%s: the first event's file_version is %r, not 'brain.Event:2'" % (where, ev["file_version"]))
        events.append(ev)
        pos += 16 + length
        index += 1
    if not events:
        raise FormatError("%s: no records" % path)
    return events


def main(argv):
    if len(argv) == 3 and argv[1] == "--crc":
        print("%08x" % crc32c(argv[2].encode("utf-8")))
        return 0
    if len(argv) < 2:
        print("usage: tfevents_read.py FILE... | --crc TEXT", file=sys.stderr)
        return 2
    for path in argv[1:]:
        try:
            events = read_events(path)
        except (OSError, FormatError) as e:
            print("tfevents_read.py: %s" % e, file=sys.stderr)
            return 1
        print("# file %s" % path)
        for ev in events:
            for tag, value in ev["scalars"]:
                print("%s %d %r" % (tag, ev["step"], value))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
