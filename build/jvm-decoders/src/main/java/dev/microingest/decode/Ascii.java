package dev.microingest.decode;

/**
 * ASCII digits. The reference's patterns use Python's {@code \d}, which matches every Unicode digit; the JVM reads
 * only ASCII ones and declines the rest to the reference.
 */
final class Ascii {
  private Ascii() {}

  /** The digits from {@code start} to {@code end} as a number, or -1 when any is not one. */
  static int digits(String text, int start, int end) {
    int value = 0;
    for (int i = start; i < end; i++) {
      char c = text.charAt(i);
      if (!isDigit(c)) {
        return -1;
      }
      value = value * 10 + (c - '0');
    }
    return value;
  }

  static boolean isDigit(char c) {
    return c >= '0' && c <= '9';
  }

  static int hexDigit(char c) {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
      return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
      return c - 'A' + 10;
    }
    return -1;
  }
}
