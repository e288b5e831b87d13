package dev.microingest.decode;

/**
 * UTF-8 exactly as Python's strict decoder reads it (RFC 3629): no overlong forms, no encoded surrogates, nothing
 * past U+10FFFF. The JDK's String constructor would replace what it refuses without a word.
 */
final class Utf8 {
  private static final char[] HEX = "0123456789abcdef".toCharArray();

  private Utf8() {}

  static boolean isValid(byte[] data) {
    return isValid(data, 0, data.length);
  }

  /** Whether data[from .. from + length) is valid UTF-8. */
  static boolean isValid(byte[] data, int from, int length) {
    int n = from + length;
    for (int i = from; i < n; ) {
      if (data[i] >= 0) {
        i++;
        continue;
      }
      int size = sequence(data, i, n);
      if (size == 0) {
        return false;
      }
      i += size;
    }
    return true;
  }

  /**
   * The length of the multi-byte sequence whose lead byte (0x80 or above) is data[i], when it is valid and complete
   * before data[n]; else 0.
   */
  static int sequence(byte[] data, int i, int n) {
    int b = data[i] & 0xFF;
    int need;
    int low = 0x80;
    int high = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
      need = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      need = 2;
      if (b == 0xE0) {
        low = 0xA0; // below is an overlong form
      } else if (b == 0xED) {
        high = 0x9F; // above are the surrogates
      }
    } else if (b >= 0xF0 && b <= 0xF4) {
      need = 3;
      if (b == 0xF0) {
        low = 0x90;
      } else if (b == 0xF4) {
        high = 0x8F; // above is past U+10FFFF
      }
    } else {
      return 0;
    }
    if (i + need >= n) { // truncated
      return 0;
    }
    int second = data[i + 1] & 0xFF;
    if (second < low || second > high) {
      return 0;
    }
    for (int k = 2; k <= need; k++) {
      int next = data[i + k] & 0xFF;
      if (next < 0x80 || next > 0xBF) {
        return 0;
      }
    }
    return need + 1;
  }

  /** Postgres' bytea hex notation of the bytes, after `prefix`. */
  static String hex(String prefix, byte[] data) {
    StringBuilder out = new StringBuilder(prefix.length() + 2 * data.length).append(prefix);
    for (byte b : data) {
      out.append(HEX[(b >> 4) & 0xF]).append(HEX[b & 0xF]);
    }
    return out.toString();
  }
}
