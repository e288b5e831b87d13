package dev.microingest.decode;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Paths, arrays, json kept whole, key and header fields; tests/unit/decode/test_jvm_json.py compares thousands of
 * generated orders with the reference.
 */
class NestedFieldsTest {
  private static final String SPEC =
      "{\"format\":\"json\",\"max_value_bytes\":100000,\"key_required\":false,"
          + "\"timestamp_ms\":[-62135596800000,253402300799999],"
          + "\"timestamp_us\":[-62135596800000000,253402300799999999],\"fields\":["
          + "{\"name\":\"customer_id\",\"type\":\"string\",\"required\":true,\"path\":[\"customer\",\"id\"]},"
          + "{\"name\":\"first_sku\",\"type\":\"string\",\"required\":false,\"path\":[\"lines\",\"0\",\"sku\"]},"
          + "{\"name\":\"skus\",\"type\":\"array\",\"items\":\"string\",\"required\":false},"
          + "{\"name\":\"attributes\",\"type\":\"json\",\"required\":false},"
          + "{\"name\":\"trace\",\"type\":\"string\",\"required\":false,\"source\":\"header\",\"header\":\"t\"},"
          + "{\"name\":\"k\",\"type\":\"string\",\"required\":false,\"source\":\"key\"}]}";
  private final RecordDecoder decoder = RecordDecoder.of(SPEC);

  private Object[] decode(String value, String headers) {
    return decoder.decode("key".getBytes(StandardCharsets.UTF_8), value.getBytes(StandardCharsets.UTF_8), headers);
  }

  @Test
  void oneOrderInOnePass() {
    Object[] out =
        decode(
            "{\"lines\":[{\"sku\":\"A\"},{\"sku\":\"B\"}],\"skus\":[\"A\",null],\"customer\":{\"id\":\"c1\"},"
                + "\"attributes\":{\"b\":1.50,\"a\":[-0,1E5],\"b\":\"\\u0001\"}}",
            "[{\"key\":\"t\",\"value\":\"eA==\"},{\"key\":\"t\",\"value\":\"eQ==\"}]");
    assertArrayEquals(
        new Object[] {"key", "c1", "A", Arrays.asList("A", null), "{\"b\":\"\\u0001\",\"a\":[-0,1E+5]}", "y", "key"},
        out);
  }

  @Test
  void aLaterDuplicateReplacesTheWholeObject() {
    Object[] out = decode("{\"customer\":{\"id\":\"c1\"},\"lines\":[{\"sku\":\"A\"}],\"lines\":[]}", null);
    assertEquals("c1", out[1]);
    assertNull(out[2]);
    assertNull(decode("{\"customer\":{\"id\":\"c1\"},\"customer\":{\"tier\":\"gold\"}}", null), "id required");
  }

  @Test
  void whatTheReferenceRefusesIsDeclined() {
    assertNull(decode("{\"customer\":\"c1\"}", null), "a scalar where the path goes on");
    assertNull(decode("{\"customer\":{\"id\":\"c1\"},\"lines\":{\"0\":1}}", null), "a number for an object");
    assertNull(decode("{\"customer\":{\"id\":\"c1\"},\"skus\":[1]}", null), "an item of another type");
    assertNull(decode("{\"customer\":{\"id\":\"c1\"}}", "[{\"key\":\"t\",\"value\":\"AA==\"}]"), "NUL in a header");
  }

  @Test
  void pathsThatCrossAreRefusedAsASpec() {
    String crossing =
        SPEC.replace("\"path\":[\"lines\",\"0\",\"sku\"]", "\"path\":[\"skus\",\"0\"]")
            .replace("{\"name\":\"skus\",\"type\":\"array\",\"items\":\"string\",\"required\":false},", "")
            .replace("\"name\":\"attributes\",\"type\":\"json\"", "\"name\":\"attributes\",\"type\":\"json\",\"path\":[\"skus\"]");
    assertThrows(IllegalArgumentException.class, () -> RecordDecoder.of(crossing));
    String names =
        SPEC.replace("\"path\":[\"customer\",\"id\"]", "\"path\":[\"0\"]")
            .replace("\"path\":[\"lines\",\"0\",\"sku\"]", "\"path\":[\"00\"]");
    Object[] out = RecordDecoder.of(names).decode(null, "{\"00\":\"b\",\"0\":\"a\"}".getBytes(), null);
    assertEquals("a", out[1], "the value is an object: \"0\" and \"00\" are names there");
    assertEquals("b", out[2]);
  }

  @Test
  void headersAreReadAsSparkWritesThem() {
    String[] names = {"t", "u"};
    byte[][] values = RecordHeaders.lastValues("[{\"key\":\"t\"},{\"key\":\"u\",\"value\":\"eA==\"}]", names);
    assertNull(values[0]);
    assertArrayEquals("x".getBytes(StandardCharsets.UTF_8), values[1]);
    assertNull(RecordHeaders.lastValues("[{\"value\":\"eA==\"}]", names), "a header without a name");
    assertEquals(List.of(), Arrays.asList(RecordHeaders.lastValues(null, new String[0])));
  }
}
