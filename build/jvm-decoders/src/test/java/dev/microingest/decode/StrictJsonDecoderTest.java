package dev.microingest.decode;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Random;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** The decoder's own cases; tests/unit/decode/test_jvm_json.py holds it to the Python reference on thousands more. */
class StrictJsonDecoderTest {
  private static final String SPEC =
      "{\"format\":\"json\",\"max_value_bytes\":200,\"key_required\":false,"
          + "\"timestamp_ms\":[-62135596800000,253402300799999],"
          + "\"timestamp_us\":[-62135596800000000,253402300799999999],"
          + "\"fields\":[{\"name\":\"id\",\"type\":\"string\",\"required\":true},"
          + "{\"name\":\"n\",\"type\":\"integer\",\"required\":false},"
          + "{\"name\":\"d\",\"type\":\"double\",\"required\":false},"
          + "{\"name\":\"ok\",\"type\":\"boolean\",\"required\":false},"
          + "{\"name\":\"at\",\"type\":\"timestamp\",\"required\":false}]}";
  private final RecordDecoder decoder = RecordDecoder.of(SPEC);

  private Object[] decode(String key, String value) {
    return decoder.decode(
        key == null ? null : key.getBytes(StandardCharsets.UTF_8), value.getBytes(StandardCharsets.UTF_8), null);
  }

  @Test
  void anOrdinaryRecordIsTypedInDeclaredOrder() {
    assertArrayEquals(
        new Object[] {"k", "a", 5L, -0.0, true, 1_700_000_000_123_000L},
        decode("k", "{\"at\":1700000000123,\"ok\":true,\"d\":-0,\"n\":5,\"id\":\"a\",\"x\":[1,{\"y\":null}]}"));
  }

  @Test
  void aTimestampMayBeIsoText() {
    assertArrayEquals(
        new Object[] {"k", "a", null, null, null, 1_700_000_000_123_457L},
        decode("k", "{\"id\":\"a\",\"at\":\"2023-11-14T23:13:20.1234567+01:00\"}"));
  }

  @Test
  void theLastOfDuplicateNamesWinsAsInPython() {
    assertArrayEquals(new Object[] {null, "b", null, null, null, null}, decode(null, "{\"id\":\"a\",\"n\":1,\"id\":\"b\",\"n\":null}"));
  }

  @Test
  void whatTheReferenceDecidesOtherwiseIsDeclined() {
    for (String value :
        new String[] {
          "{\"n\":1}",
          "{\"id\":\"a\",\"n\":1.0}",
          "{\"id\":\"a\",\"d\":1e400}",
          "{\"id\":\"a\",\"d\":NaN}",
          "{\"id\":\"a\\u0000\"}",
          "{\"id\":\"\\ud800\"}",
          "{\"id\":\"a\",\"at\":\"2024-02-30T00:00:00Z\"}",
          "{\"id\":\"a\",\"at\":1700000000123.5}",
          "{\"id\":\"a\",\"at\":253402300800000}",
          "{\"id\":\"a\",\"ok\":1}",
          "{\"id\":\"a\"} {}",
          "{\"id\":\"a\"}]",
          "{'id':'a'}",
          "[{\"id\":\"a\"}]",
          "{\"id\":\"a\",\"d\":0e1000000000000000000}",
          "{\"id\":\"a\",\"x\":-1e-0002000000000000000000}",
          "",
        }) {
      assertNull(decode("k", value), value);
    }
    assertNull(decoder.decode(null, null, null), "a tombstone");
  }

  @Test
  void keysThatAreNotTextAreStagedInHex() {
    assertEquals("\\x00ff", RecordDecoder.keyText(new byte[] {0, (byte) 0xFF}));
    assertEquals("\\x5c7841", RecordDecoder.keyText("\\xA".getBytes(StandardCharsets.UTF_8)));
    assertEquals("é", RecordDecoder.keyText("é".getBytes(StandardCharsets.UTF_8)));
  }

  @Test
  void utf8IsWhatPythonAccepts() {
    assertTrue(Utf8.isValid(new byte[] {(byte) 0xF4, (byte) 0x8F, (byte) 0xBF, (byte) 0xBF}));
    assertFalse(Utf8.isValid(new byte[] {(byte) 0xED, (byte) 0xA0, (byte) 0x80}), "a surrogate");
    assertFalse(Utf8.isValid(new byte[] {(byte) 0xC0, (byte) 0x80}), "overlong");
    assertFalse(Utf8.isValid(new byte[] {(byte) 0xF4, (byte) 0x90, (byte) 0x80, (byte) 0x80}), "past U+10FFFF");
    assertFalse(Utf8.isValid(new byte[] {(byte) 0xE2, (byte) 0x82}), "truncated");
  }

  private static final Pattern HUGE_EXPONENT = Pattern.compile("[eE][+-]?0*[1-9][0-9]{15}");

  /** The screen's three rules, each said the plain way: the JDK's strict UTF-8 decoder and a regular expression. */
  private static boolean screenedPlainly(byte[] value) {
    String text;
    try {
      text =
          StandardCharsets.UTF_8
              .newDecoder()
              .onMalformedInput(CodingErrorAction.REPORT)
              .onUnmappableCharacter(CodingErrorAction.REPORT)
              .decode(ByteBuffer.wrap(value))
              .toString();
    } catch (CharacterCodingException e) {
      return false;
    }
    return !text.startsWith("\uFEFF") && text.indexOf('\0') < 0 && !HUGE_EXPONENT.matcher(text).find();
  }

  @Test
  void theOnePassScreenAgreesWithItsRulesSaidPlainly() {
    // Bytes drawn to hit each rule's edges: 'e' and exponent digits, NUL, lead and continuation bytes, the BOM's.
    byte[] alphabet = {
      'e', 'E', '+', '-', '0', '1', '9', 'a', '"', 0, (byte) 0x80, (byte) 0xBF, (byte) 0xC2, (byte) 0xDF, (byte) 0xE0,
      (byte) 0xA0, (byte) 0xED, (byte) 0x9F, (byte) 0xF0, (byte) 0x90, (byte) 0xF4, (byte) 0x8F, (byte) 0xC0,
      (byte) 0xF5, (byte) 0xEF, (byte) 0xBB
    };
    Random random = new Random(59);
    int refused = 0;
    for (int round = 0; round < 200_000; round++) {
      byte[] value = new byte[random.nextInt(40)];
      for (int i = 0; i < value.length; i++) {
        int pick = random.nextInt(16);
        value[i] =
            pick == 0
                ? (byte) random.nextInt(256)
                : pick < 4 ? alphabet[random.nextInt(alphabet.length)] : alphabet[random.nextInt(9)]; // 'e' to '"'

      }
      if (value.length > 20 && random.nextBoolean()) { // an exponent of about 16 digits, some of them leading zeros
        int at = random.nextInt(value.length - 20);
        value[at] = random.nextBoolean() ? (byte) 'e' : (byte) 'E';
        for (int i = at + 1, end = at + 1 + 14 + random.nextInt(5); i < end; i++) {
          value[i] = (byte) (random.nextInt(3) == 0 ? '0' : '0' + random.nextInt(10));
        }
      }
      boolean expected = screenedPlainly(value);
      assertEquals(expected, StrictJsonDecoder.screened(value), () -> java.util.Arrays.toString(value));
      refused += expected ? 0 : 1;
    }
    assertTrue(refused > 20_000 && refused < 180_000, "each answer drawn often: " + refused + " refused");
    byte[] bom = {(byte) 0xEF, (byte) 0xBB, (byte) 0xBF, '{', '}'};
    assertFalse(StrictJsonDecoder.screened(bom));
    assertTrue(StrictJsonDecoder.screened("{\"x\":1e000000000000000000000001}".getBytes(StandardCharsets.UTF_8)));
    assertFalse(StrictJsonDecoder.screened("{\"x\":1E-1234567890123456}".getBytes(StandardCharsets.UTF_8)));
  }

  @Test
  void aSpecWrittenForAnotherBuildOfTheJarIsRefusedBeforeItIsRead() {
    RecordDecoder.checkBuild(SPEC); // a spec naming no jar: as tests and spark-submit's --jars write it
    IllegalStateException refused =
        assertThrows(
            IllegalStateException.class,
            () -> RecordDecoder.checkBuild(SPEC.replace("}]}", "}],\"jar\":\"microingest-decoders-0123.jar\"}")));
    assertTrue(refused.getMessage().contains("another build of microingest"), refused.getMessage());
  }

  @Test
  void aSpecWithAnUnknownKeyIsRefused() {
    assertThrows(IllegalArgumentException.class, () -> RecordDecoder.of("{\"fields\":[],\"colour\":1}"));
  }
}
