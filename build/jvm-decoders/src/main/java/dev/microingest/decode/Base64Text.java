package dev.microingest.decode;

import java.util.Base64;

/**
 * Bytes as JSON holds them, read as the reference reads them (converters._bytes): standard base64 with its padding,
 * in the one spelling that encodes those bytes (no stray bits in the last character, no missing or extra '='). Any
 * other text is declined: the reference names its dead letter.
 */
final class Base64Text {
  private Base64Text() {}

  /** The bytes, or null to decline. */
  static byte[] bytes(String text) {
    byte[] decoded;
    try {
      decoded = Base64.getDecoder().decode(text);
    } catch (IllegalArgumentException e) {
      return null;
    }
    // Java's decoder takes missing padding and stray bits; the text that encodes the bytes again is the only one
    // the reference takes
    return Base64.getEncoder().encodeToString(decoded).equals(text) ? decoded : null;
  }
}
