package dev.microingest.decode;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.math.BigDecimal;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** A few of the reference's cases (tests/unit/decode/test_held_values.py); tests/integration/spark/test_held_in_jvm.py
 * compares thousands with the reference through Spark. */
class HeldValueTest {
  private static final HeldValue STRICT =
      HeldValue.of("{\"field\":{\"name\":\"a\",\"type\":\"decimal\",\"required\":false,\"precision\":12,\"scale\":2}}");
  private static final HeldValue ROUNDED =
      HeldValue.of(
          "{\"field\":{\"name\":\"a\",\"type\":\"decimal\",\"required\":false,\"precision\":12,\"scale\":2,"
              + "\"rounding\":\"half_even\"},\"jar\":\"x.jar\"}");
  private static final HeldValue ARRAY =
      HeldValue.of(
          "{\"field\":{\"name\":\"a\",\"type\":\"array\",\"items\":\"decimal\",\"required\":false,\"precision\":5,"
              + "\"scale\":1}}");
  private static final HeldValue DOC = HeldValue.of("{\"field\":{\"name\":\"d\",\"type\":\"json\",\"required\":false}}");

  @Test
  void aDecimalLandsAtItsScaleFromEveryNumericForm() {
    assertEquals("ok:11.96", ROUNDED.held(new BigDecimal("11.9595")));
    assertEquals("ok:0.12", ROUNDED.held(new BigDecimal("0.125")));
    assertEquals("ok:11.90", STRICT.held(new BigDecimal("11.9000")));
    assertEquals("ok:0.50", STRICT.held(0.5));
    assertEquals("ok:0.50", STRICT.held(0.5f));
    assertEquals("ok:12.00", STRICT.held(12L));
    assertEquals("ok:12.00", STRICT.held(12));
    assertEquals("ok:12.50", STRICT.held("12.5"));
    assertEquals("ok:0.00", STRICT.held(new BigDecimal("-0.000")));
    assertNull(STRICT.held(null));
  }

  @Test
  void whatTheReferenceRefusesOrTheJvmDoesNotKnowIsLeft() {
    assertEquals(HeldValue.LEFT, STRICT.held(new BigDecimal("11.9595")));
    assertEquals(HeldValue.LEFT, STRICT.held(0.1)); // its exact binary value has 55 places
    assertEquals(HeldValue.LEFT, STRICT.held(Double.NaN));
    assertEquals(HeldValue.LEFT, STRICT.held(true));
    assertEquals(HeldValue.LEFT, STRICT.held("1,5"));
    assertEquals(HeldValue.LEFT, ROUNDED.held(new BigDecimal("9999999999.995")));
    assertEquals(HeldValue.LEFT, ARRAY.held(new BigDecimal("1")));
  }

  @Test
  void aDecimalArrayKeepsItsNullsAndIsLeftWholeForOneElement() {
    scala.collection.Seq<Object> items =
        scala.jdk.javaapi.CollectionConverters.asScala(Arrays.<Object>asList(new BigDecimal("1.25"), null, 3L))
            .toSeq();
    assertEquals("ok:[1.2,null,3.0]", HeldValue.of(
            "{\"field\":{\"name\":\"a\",\"type\":\"array\",\"items\":\"decimal\",\"required\":false,\"precision\":5,"
                + "\"scale\":1,\"rounding\":\"half_even\"}}")
        .held(items));
    assertEquals(HeldValue.LEFT, ARRAY.held(items)); // 1.25 has two places; this one refuses
  }

  @Test
  void jsonTextIsKeptAsARecordsJsonFieldIs() {
    assertEquals("ok:{\"n\":1.50,\"z\":-0}", DOC.held("{\"n\": 1.50, \"z\": -0}"));
    assertEquals("ok:{\"a\":3,\"b\":2}", DOC.held("{\"a\": 1, \"b\": 2, \"a\": 3}"));
    assertNull(DOC.held("null"));
    assertNull(DOC.held(" null "));
    for (String left : new String[] {"{\"a\": \"\\ud800\"}", "{\"n\": 1e400000}", "{broken", "", "1 2", "NaN"}) {
      assertEquals(HeldValue.LEFT, DOC.held(left), left);
    }
    assertEquals(HeldValue.LEFT, DOC.held(12L));
  }

  @Test
  void aSpecWithoutAHeldFieldIsRefused() {
    assertThrows(
        IllegalArgumentException.class,
        () -> HeldValue.of("{\"field\":{\"name\":\"a\",\"type\":\"string\",\"required\":false}}"));
  }
}
