package dev.microingest.decode;

/**
 * A UUID as the reference reads its text (converters._uuid): 32 hexadecimal digits, either all in the usual groups
 * (8-4-4-4-12) or with no hyphen at all. The value is its 16 bytes, as the staged column holds it.
 */
final class UuidText {
  private static final int PLAIN = 32;
  private static final int HYPHENATED = 36;

  private UuidText() {}

  /** A UUID's text as Python's str(UUID) writes it: hyphenated, lower case. */
  static String text(byte[] uuid) {
    StringBuilder out = new StringBuilder(HYPHENATED);
    for (int i = 0; i < uuid.length; i++) {
      if (i == 4 || i == 6 || i == 8 || i == 10) {
        out.append('-');
      }
      out.append(Character.forDigit((uuid[i] >> 4) & 0xF, 16)).append(Character.forDigit(uuid[i] & 0xF, 16));
    }
    return out.toString();
  }

  /** The UUID's 16 bytes, or null to decline. */
  static byte[] bytes(String text) {
    int n = text.length();
    if (n != PLAIN && n != HYPHENATED) {
      return null;
    }
    byte[] out = new byte[16];
    int at = 0;
    for (int i = 0; i < PLAIN; i++) {
      if (n == HYPHENATED && (at == 8 || at == 13 || at == 18 || at == 23)) {
        if (text.charAt(at++) != '-') {
          return null;
        }
      }
      int digit = Ascii.hexDigit(text.charAt(at++));
      if (digit < 0) {
        return null;
      }
      out[i / 2] |= (byte) (i % 2 == 0 ? digit << 4 : digit);
    }
    return out;
  }
}
