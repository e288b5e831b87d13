package dev.microingest.decode;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;

/**
 * A double as Python's repr() writes it (json_values.json_text writes a float so): the shortest decimal that reads back
 * as the same double, the nearest of those when two are as short, in positional notation from 1e-4 up to below 1e16
 * ({@code 0.0001}, {@code 1234.5}, {@code 1e+16}, {@code 1e-05}), with ".0" on a whole number. Java 17's
 * Double.toString is neither always the shortest nor so formatted.
 */
final class PythonFloat {
  private static final int MAX_DIGITS = 17; // every double reads back from 17 significant digits
  private static final int LOWEST_POSITIONAL = -4; // Python's float_repr_style 'short': repr's 'r' format
  private static final int HIGHEST_POSITIONAL = 16;

  private PythonFloat() {}

  /** repr(d) for a finite d; "-0.0" for negative zero (json_text writes JSON's "-0" itself). */
  static String repr(double d) {
    if (d == 0) {
      return 1 / d < 0 ? "-0.0" : "0.0";
    }
    BigDecimal digits = shortest(d);
    String sign = digits.signum() < 0 ? "-" : "";
    BigDecimal abs = digits.abs().stripTrailingZeros();
    String coefficient = abs.unscaledValue().toString();
    int exponent = coefficient.length() - 1 - abs.scale(); // d = c.ccc × 10^exponent
    if (exponent < LOWEST_POSITIONAL || exponent >= HIGHEST_POSITIONAL) {
      String mantissa = coefficient.length() == 1 ? coefficient : coefficient.charAt(0) + "." + coefficient.substring(1);
      String power = String.format("%02d", Math.abs(exponent));
      return sign + mantissa + "e" + (exponent < 0 ? "-" : "+") + power;
    }
    String plain = abs.toPlainString();
    return sign + (plain.indexOf('.') < 0 ? plain + ".0" : plain);
  }

  /** The shortest decimal that reads back as d; of two as short, the nearer (half to even between them). */
  private static BigDecimal shortest(double d) {
    BigDecimal exact = new BigDecimal(d);
    for (int p = 1; p < MAX_DIGITS; p++) {
      BigDecimal nearest = exact.round(new MathContext(p, RoundingMode.HALF_EVEN));
      if (nearest.doubleValue() == d) {
        return nearest;
      }
      // where d's gap below is half its gap above (a power of two), the other neighbour may read back when the
      // nearer does not
      BigDecimal down = exact.round(new MathContext(p, RoundingMode.DOWN));
      BigDecimal other = down.compareTo(nearest) == 0 ? exact.round(new MathContext(p, RoundingMode.UP)) : down;
      if (other.doubleValue() == d) {
        return other;
      }
    }
    return exact.round(new MathContext(MAX_DIGITS, RoundingMode.HALF_EVEN));
  }
}
