package dev.microingest.decode;

import java.math.BigDecimal;
import java.math.RoundingMode;

/**
 * A declared decimal(precision, scale) as the reference makes one (converters._decimal and fit_decimal): JSON's number
 * text or decimal text read exactly, then fitted to the scale. More digits before the point than precision less scale
 * are refused; more digits after it (trailing zeros aside) are refused, or rounded half to even when the declaration
 * says {@code rounding: half_even}; a value that rounds up past the digits before the point is refused. Refused means
 * declined: the reference names the dead letter.
 *
 * <p>The result always has exactly the declared scale: Spark would round any other to it half up, silently.
 */
final class ExactDecimal {
  private static final int MAX_EXPONENT_DIGITS = 6; // converters._DECIMAL_TEXT

  private ExactDecimal() {}

  /**
   * Decimal text as the reference takes it ({@code [+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d{1,6})?}, ASCII digits), or
   * null.
   */
  static BigDecimal text(String text) {
    int n = text.length();
    int at = n > 0 && (text.charAt(0) == '+' || text.charAt(0) == '-') ? 1 : 0;
    int whole = digitsFrom(text, at);
    at += whole;
    int fraction = 0;
    if (at < n && text.charAt(at) == '.') {
      fraction = digitsFrom(text, ++at);
      at += fraction;
    }
    if (whole == 0 && fraction == 0) {
      return null;
    }
    if (at < n && (text.charAt(at) == 'e' || text.charAt(at) == 'E')) {
      at++;
      if (at < n && (text.charAt(at) == '+' || text.charAt(at) == '-')) {
        at++;
      }
      int exponent = digitsFrom(text, at);
      if (exponent == 0 || exponent > MAX_EXPONENT_DIGITS) {
        return null;
      }
      at += exponent;
    }
    return at == n ? new BigDecimal(text) : null;
  }

  /** The exact value fitted to decimal(precision, scale), or null when the reference refuses it. */
  static BigDecimal fit(BigDecimal exact, int precision, int scale, boolean halfEven) {
    long whole = precision - scale;
    if (exact.signum() != 0 && adjusted(exact) >= whole) {
      return null;
    }
    if (places(exact) > scale) {
      if (!halfEven) {
        return null;
      }
      if (exact.signum() != 0 && adjusted(exact) < -scale - 1L) {
        exact = BigDecimal.ZERO; // below half the last place (and no division by a power of ten of huge exponent)
      }
    }
    BigDecimal fitted = exact.setScale(scale, RoundingMode.HALF_EVEN);
    return fitted.signum() != 0 && adjusted(fitted) >= whole ? null : fitted;
  }

  /** The power of ten of the first digit, as Python's Decimal.adjusted(): 1234.5 is 3, 0.012 is -2. */
  private static long adjusted(BigDecimal d) {
    return (long) d.precision() - d.scale() - 1;
  }

  /** Digits after the point, trailing zeros aside: 1234.500 has 1, 0.000 none. */
  private static long places(BigDecimal d) {
    return d.signum() == 0 ? 0 : Math.max(0, d.stripTrailingZeros().scale());
  }

  private static int digitsFrom(String text, int start) {
    int at = start;
    while (at < text.length() && Ascii.isDigit(text.charAt(at))) {
      at++;
    }
    return at - start;
  }
}
