package dev.microingest.decode;

import java.nio.charset.StandardCharsets;

/**
 * Avro's binary encoding read strictly: where fastavro (the reference's reader) would read a value differently or
 * refuse it, or where the bytes are merely unusual, this throws {@link #DECLINED}. A varint must be minimal and fit
 * 64 bits (fastavro wraps longer ones), a boolean is 0 or 1 (fastavro takes any byte), an index lies within its enum
 * or union (fastavro reads -1 as an enum's last symbol), a length within the value, a string valid UTF-8.
 */
final class AvroInput {
  /** Thrown where the reference decides: preallocated and without a stack, as declining is routine. */
  static final RuntimeException DECLINED =
      new RuntimeException("declined: the reference decodes this record", null, false, false) {
        private static final long serialVersionUID = 1L;
      };

  private static final int MAX_VARINT_BYTES = 10;

  private final byte[] data;
  int pos;

  AvroInput(byte[] data, int pos) {
    this.data = data;
    this.pos = pos;
  }

  boolean atEnd() {
    return pos == data.length;
  }

  int remaining() {
    return data.length - pos;
  }

  long readLong() {
    long raw = 0;
    for (int i = 0; i < MAX_VARINT_BYTES; i++) {
      if (pos >= data.length) {
        throw DECLINED;
      }
      int b = data[pos++] & 0xFF;
      if (i == MAX_VARINT_BYTES - 1 && b > 1) {
        throw DECLINED; // past 64 bits
      }
      raw |= (long) (b & 0x7F) << (7 * i);
      if ((b & 0x80) == 0) {
        if (b == 0 && i > 0) {
          throw DECLINED; // not minimal
        }
        return (raw >>> 1) ^ -(raw & 1);
      }
    }
    throw DECLINED;
  }

  /** An Avro int: a long within 32 bits (fastavro reads wider ones as they are). */
  long readInt() {
    long v = readLong();
    if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
      throw DECLINED;
    }
    return v;
  }

  boolean readBoolean() {
    if (pos >= data.length) {
      throw DECLINED;
    }
    int b = data[pos++];
    if (b != 0 && b != 1) {
      throw DECLINED;
    }
    return b == 1;
  }

  float readFloat() {
    return Float.intBitsToFloat((int) littleEndian(4));
  }

  double readDouble() {
    return Double.longBitsToDouble(littleEndian(8));
  }

  private long littleEndian(int bytes) {
    if (remaining() < bytes) {
      throw DECLINED;
    }
    long v = 0;
    for (int i = 0; i < bytes; i++) {
      v |= (long) (data[pos + i] & 0xFF) << (8 * i);
    }
    pos += bytes;
    return v;
  }

  /** The length of the bytes or string that follows, within the value. */
  int readLength() {
    long n = readLong();
    if (n < 0 || n > remaining()) {
      throw DECLINED;
    }
    return (int) n;
  }

  byte[] readBytes(int n) {
    if (n < 0 || n > remaining()) {
      throw DECLINED;
    }
    byte[] out = java.util.Arrays.copyOfRange(data, pos, pos + n);
    pos += n;
    return out;
  }

  void skip(int bytes) {
    if (bytes < 0 || bytes > remaining()) {
      throw DECLINED;
    }
    pos += bytes;
  }

  String readString() {
    int n = readLength();
    if (!Utf8.isValid(data, pos, n)) {
      throw DECLINED;
    }
    String text = new String(data, pos, n, StandardCharsets.UTF_8);
    pos += n;
    return text;
  }

  void skipString() {
    int n = readLength();
    if (!Utf8.isValid(data, pos, n)) {
      throw DECLINED; // fastavro decodes every string, read or not, and refuses this one
    }
    pos += n;
  }

  /** An enum's symbol or a union's branch: 0 to n - 1. */
  int readIndex(int n) {
    long i = readLong();
    if (i < 0 || i >= n) {
      throw DECLINED;
    }
    return (int) i;
  }
}
