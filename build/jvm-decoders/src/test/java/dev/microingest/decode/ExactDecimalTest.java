package dev.microingest.decode;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.math.BigDecimal;
import org.junit.jupiter.api.Test;

/** The reference's rules (converters.fit_decimal); tests/unit/decode/test_jvm_json.py compares thousands with Python. */
class ExactDecimalTest {
  private static String fit(String text, int precision, int scale, boolean halfEven) {
    BigDecimal fitted = ExactDecimal.fit(new BigDecimal(text), precision, scale, halfEven);
    return fitted == null ? null : fitted.toPlainString();
  }

  @Test
  void everyValueHasTheDeclaredScale() {
    assertEquals("1234.50", fit("1234.5", 6, 2, false));
    assertEquals("1234.50", fit("1234.500000", 6, 2, false));
    assertEquals("1200.00", fit("12E2", 6, 2, false));
    assertEquals("0.00", fit("-0.000", 6, 2, false));
    assertEquals("-9999.99", fit("-9999.99", 6, 2, false));
  }

  @Test
  void digitsBeforeThePointBeyondPrecisionLessScaleAreRefused() {
    assertNull(fit("10000", 6, 2, false));
    assertNull(fit("1E4", 6, 2, true));
    assertNull(fit("9999.995", 6, 2, true)); // rounds up to 10000.00
  }

  @Test
  void moreDigitsAfterThePointAreRefusedOrRoundedHalfToEven() {
    assertNull(fit("0.125", 6, 2, false));
    assertEquals("0.12", fit("0.125", 6, 2, true));
    assertEquals("0.14", fit("0.135", 6, 2, true));
    assertEquals("0.00", fit("0.005", 6, 2, true));
    assertEquals("0.01", fit("0.0051", 6, 2, true));
    assertEquals("0.00", fit("1E-999999", 6, 2, true));
    assertNull(fit("1E-999999", 6, 2, false));
  }

  @Test
  void decimalTextFollowsTheReferencesPattern() {
    assertEquals(new BigDecimal("1.5"), ExactDecimal.text("+1.5"));
    assertEquals(new BigDecimal("5"), ExactDecimal.text("5."));
    assertEquals(new BigDecimal("0.5"), ExactDecimal.text(".5"));
    assertEquals(new BigDecimal("1E+123456"), ExactDecimal.text("1e123456"));
    for (String refused : new String[] {"", ".", "+", "1e", "1e1234567", " 1", "1 ", "1_0", "0x1", "NaN", "\u0661"}) {
      assertNull(ExactDecimal.text(refused), refused);
    }
  }
}
