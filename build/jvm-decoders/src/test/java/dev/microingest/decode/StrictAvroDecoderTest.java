package dev.microingest.decode;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/**
 * The decoder's own cases; tests/integration/decode/test_jvm_avro.py holds it to the Python reference (fastavro) on
 * thousands more, under schemas registered in a real registry.
 */
class StrictAvroDecoderTest {
  // Writer schema 7: {id: string, at: [null, timestamp-millis], n: long, tags: {map of [null, bytes]}}.
  private static final String PLAN =
      "{\"types\":[[\"record\",[1,2,5,6]],[\"string\"],[\"union\",[3,4]],[\"null\"],[\"long\",1000],[\"long\"],"
          + "[\"map\",7],[\"union\",[3,8]],[\"bytes\"]],\"declared\":[0,2,1,-1]}";
  private static final String SPEC =
      "{\"format\":\"avro\",\"max_value_bytes\":200,\"key_required\":false,"
          + "\"timestamp_ms\":[-62135596800000,253402300799999],"
          + "\"timestamp_us\":[-62135596800000000,253402300799999999],"
          + "\"fields\":[{\"name\":\"id\",\"type\":\"string\",\"required\":true},"
          + "{\"name\":\"n\",\"type\":\"integer\",\"required\":false},"
          + "{\"name\":\"at\",\"type\":\"timestamp\",\"required\":false}],"
          + "\"writers\":{\"7\":"
          + PLAN
          + "}}";
  private static final byte[] HEAD = {0, 0, 0, 0, 7};
  private final RecordDecoder decoder = RecordDecoder.of(SPEC);

  private static byte[] value(int... bytes) {
    byte[] out = new byte[HEAD.length + bytes.length];
    System.arraycopy(HEAD, 0, out, 0, HEAD.length);
    for (int i = 0; i < bytes.length; i++) {
      out[HEAD.length + i] = (byte) bytes[i];
    }
    return out;
  }

  @Test
  void anOrdinaryRecordIsTypedInDeclaredOrder() {
    // id "a", at: branch 1, 5 ms; n 7 (zigzag 14); a map of one block: {"k": null}, then its end
    byte[] v = value(2, 'a', 2, 10, 14, 2, 2, 'k', 0, 0);
    assertArrayEquals(new Object[] {"key", "a", 7L, 5000L}, decoder.decode("key".getBytes(), v, null));
  }

  @Test
  void aNullTimestampAndANegativeBlockCountAreRead() {
    // the map's block as count -1 with its size in bytes, which fastavro reads too
    byte[] v = value(2, 'a', 0, 1, 1, 8, 2, 'k', 2, 2, 'x', 0);
    assertArrayEquals(new Object[] {null, "a", -1L, null}, decoder.decode(null, v, null));
  }

  @Test
  void whatTheReferenceReadsOtherwiseOrRefusesIsDeclined() {
    int[][] odd = {
      {2, 'a', 2, 10, 14, 0, 0}, // a byte past the datum
      {2, 'a', 2, 10, 14}, // the map missing
      {2, 0, 0, 14, 0}, // NUL in the id
      {2, 0xff, 0, 14, 0}, // not UTF-8
      {2, 'a', 4, 10, 14, 0}, // a union branch past the two
      {2, 'a', 1, 10, 14, 0}, // a union branch of -1
      {2, 'a', 0, 0x8e, 0x00, 0}, // n's varint not minimal
      {2, 'a', 0, 14, 2, 2, 0xc3, 0, 0}, // a map key not UTF-8
      {2, 'a', 0, 14, 0x7e, 0}, // a map block of 63 entries in 1 byte
      {2, 'a', 2, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02, 14, 0}, // a varint past 64 bits
      {2, 'a', 2, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 14, 0}, // 2^55 ms: past the year 9999
    };
    for (int i = 0; i < odd.length; i++) {
      assertNull(decoder.decode(null, value(odd[i]), null), "case " + i);
    }
    assertArrayEquals(new Object[] {null, "", 7L, null}, decoder.decode(null, value(0, 0, 14, 0), null), "an empty id");
    byte[] otherSchema = value(2, 'a', 0, 14, 0);
    otherSchema[4] = 8;
    assertNull(decoder.decode(null, otherSchema, null));
    assertNull(decoder.decode(null, new byte[] {1, 0, 0, 0, 7, 2, 'a', 0, 14, 0}, null));
    assertNull(decoder.decode(null, null, null));
  }

  @Test
  void aPlanThatDoesNotFitItsDeclarationIsRefused() {
    String wrong = SPEC.replace("[\"long\",1000]", "[\"boolean\"]");
    assertThrows(IllegalArgumentException.class, () -> RecordDecoder.of(wrong));
    String dangling = SPEC.replace("[\"map\",7]", "[\"map\",70]");
    assertThrows(IllegalArgumentException.class, () -> RecordDecoder.of(dangling));
    String notNested = SPEC.replace("\"declared\":[0,2,1,-1]", "\"declared\":[[0],2,1,-1]");
    assertThrows(IllegalArgumentException.class, () -> RecordDecoder.of(notNested));
  }

  // Writer schema 9: {price: decimal(5,2) bytes, day: [null, date], id: uuid string, blob: fixed(2),
  // customer: [null, {name: string, since: ISO text}], amounts: array of [null, decimal text]}
  private static final String TYPED_PLAN =
      "{\"types\":[[\"record\",[1,2,5,6,7,11]],[\"decimal\",[5,2]],[\"union\",[3,4]],[\"null\"],[\"date\"],"
          + "[\"string\"],[\"fixed\",2],[\"union\",[3,8]],[\"record\",[5,5]],[\"union\",[3,5]],[\"null\"],"
          + "[\"array\",9]],\"declared\":[0,1,2,3,[4,5],6]}";
  private static final String TYPED_SPEC =
      "{\"format\":\"avro\",\"max_value_bytes\":200,\"key_required\":false,"
          + "\"timestamp_ms\":[-62135596800000,253402300799999],"
          + "\"timestamp_us\":[-62135596800000000,253402300799999999],"
          + "\"fields\":[{\"name\":\"price\",\"type\":\"decimal\",\"required\":true,\"precision\":6,\"scale\":3},"
          + "{\"name\":\"day\",\"type\":\"date\",\"required\":false},"
          + "{\"name\":\"id\",\"type\":\"uuid\",\"required\":false},"
          + "{\"name\":\"blob\",\"type\":\"bytes\",\"required\":false},"
          + "{\"name\":\"name\",\"type\":\"string\",\"required\":false,\"path\":[\"customer\",\"name\"]},"
          + "{\"name\":\"since\",\"type\":\"timestamp\",\"required\":false,\"path\":[\"customer\",\"since\"]},"
          + "{\"name\":\"amounts\",\"type\":\"array\",\"items\":\"decimal\",\"required\":false,"
          + "\"precision\":4,\"scale\":1,\"rounding\":\"half_even\"},"
          + "{\"name\":\"trace\",\"type\":\"string\",\"required\":false,\"source\":\"header\",\"header\":\"t\"}],"
          + "\"writers\":{\"9\":"
          + TYPED_PLAN
          + "}}";
  private final RecordDecoder typed = RecordDecoder.of(TYPED_SPEC);

  private static final String ID = "123e4567-e89b-12d3-a456-426614174000";

  /** An Avro value under schema 9, written part by part: raw bytes (varints already zigzagged) and texts. */
  private static final class Typed {
    private final java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();

    Typed() {
      out.writeBytes(new byte[] {0, 0, 0, 0, 9});
    }

    Typed raw(int... bytes) {
      for (int b : bytes) {
        out.write(b);
      }
      return this;
    }

    Typed text(String text) {
      byte[] b = text.getBytes(java.nio.charset.StandardCharsets.UTF_8);
      out.write(b.length * 2); // short texts: a one-byte zigzag length
      out.writeBytes(b);
      return this;
    }

    /** price 123.45, day as given, the id, blob "xy": what every case below shares before the customer. */
    static Typed upToCustomer(String id, int... day) {
      return new Typed().raw(4, 0x30, 0x39).raw(day).text(id).raw('x', 'y');
    }

    byte[] bytes() {
      return out.toByteArray();
    }
  }

  @Test
  void everyDeclaredTypeAndNestedFieldIsTyped() {
    // day: branch 1, 19723 days (zigzag 39446); customer: branch 1, then its fields; amounts: a block of 2 items,
    // "0.25" and null, then the end
    byte[] v =
        Typed.upToCustomer(ID, 2, 0x96, 0xb4, 0x02)
            .raw(2)
            .text("ann")
            .text("2024-01-02T03:04:05.5+01:00")
            .raw(4, 2)
            .text("0.25")
            .raw(0, 0)
            .bytes();
    Object[] got = typed.decode(null, v, "[{\"key\":\"t\",\"value\":\"dA==\"}]");
    assertArrayEquals(
        new Object[] {
          null,
          new java.math.BigDecimal("123.450"),
          java.time.LocalDate.of(2024, 1, 1),
          UuidText.bytes(ID),
          new byte[] {'x', 'y'},
          "ann",
          1704161045500000L,
          java.util.Arrays.asList(new java.math.BigDecimal("0.2"), null),
          "t"
        },
        got);
  }

  @Test
  void whatTheReferenceRefusesOrRoundsIsDeclined() {
    byte[] plain = Typed.upToCustomer(ID, 0).raw(0, 0).bytes();
    assertArrayEquals(
        new Object[] {
          null, new java.math.BigDecimal("123.450"), null, UuidText.bytes(ID), new byte[] {'x', 'y'}, null, null,
          java.util.List.of(), null
        },
        typed.decode(null, plain, null));
    // a price of 7 digits, past the writer's precision of 5: fastavro would round it
    byte[] tooLong = new Typed().raw(8, 0x00, 0x98, 0x96, 0x7f, 0).text(ID).raw('x', 'y', 0, 0).bytes();
    assertNull(typed.decode(null, tooLong, null));
    // day 2932897, in the year 10000; 2932896 is 9999-12-31
    assertNull(typed.decode(null, Typed.upToCustomer(ID, 2, 0xc2, 0x82, 0xe6, 0x02).raw(0, 0).bytes(), null));
    assertNotNull(typed.decode(null, Typed.upToCustomer(ID, 2, 0xc0, 0x82, 0xe6, 0x02).raw(0, 0).bytes(), null));
    // a UUID in braces, which fastavro's UUID() takes and the reference's text does not
    assertNull(typed.decode(null, Typed.upToCustomer("{" + ID + "}", 0).raw(0, 0).bytes(), null));
    // an amount with more digits than decimal(4,1) holds before the point
    assertNull(typed.decode(null, Typed.upToCustomer(ID, 0).raw(0, 2, 2).text("1000").raw(0).bytes(), null));
    // a nested record's field holding NUL
    String since = "2024-01-02T00:00:00Z";
    assertNull(typed.decode(null, Typed.upToCustomer(ID, 0).raw(2).text("a\0").text(since).raw(0).bytes(), null));
    assertNotNull(typed.decode(null, Typed.upToCustomer(ID, 0).raw(2).text("a").text(since).raw(0).bytes(), null));
  }

  // Writer schema 5: {attributes: arrays of [null, the same arrays], any deep; meta: a record of a uuid and a map of
  // dates}, both into json fields.
  private static final String JSON_SPEC =
      "{\"format\":\"avro\",\"max_value_bytes\":2000,\"key_required\":false,"
          + "\"timestamp_ms\":[-62135596800000,253402300799999],"
          + "\"timestamp_us\":[-62135596800000000,253402300799999999],"
          + "\"fields\":[{\"name\":\"attributes\",\"type\":\"json\",\"required\":false},"
          + "{\"name\":\"meta\",\"type\":\"json\",\"required\":false}],"
          + "\"writers\":{\"5\":{\"types\":[[\"record\",[1,4]],[\"array\",2],[\"union\",[3,1]],[\"null\"],"
          + "[\"record\",[5,6],[\"id\",\"days\"]],[\"uuid\"],[\"map\",7],[\"date\"]],\"declared\":[0,1]}}}";

  private static byte[] jsonValue(int depth, String id, int day) {
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    out.writeBytes(new byte[] {0, 0, 0, 0, 5});
    for (int i = 1; i < depth; i++) {
      out.writeBytes(new byte[] {2, 2}); // a block of one item, the array branch
    }
    out.writeBytes(new byte[] {2, 0}); // the innermost: a block of one null
    for (int i = 0; i < depth; i++) {
      out.write(0);
    }
    byte[] text = id.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    out.write(text.length * 2);
    out.writeBytes(text);
    out.writeBytes(new byte[] {2, 2, 'd', (byte) (day * 2), 0}); // {"d": day}
    return out.toByteArray();
  }

  @Test
  void aJsonFieldIsWrittenAsTheReferenceWritesItsTextAndDeclinedPastItsDepth() {
    RecordDecoder json = RecordDecoder.of(JSON_SPEC);
    Object[] got = json.decode(null, jsonValue(2, ID.toUpperCase(java.util.Locale.ROOT), 3), null);
    assertArrayEquals(new Object[] {null, "[[null]]", "{\"id\":\"" + ID + "\",\"days\":{\"d\":\"1970-01-04\"}}"}, got);
    assertNotNull(json.decode(null, jsonValue(200, ID, 3), null)); // the deepest array at depth 199
    assertNull(json.decode(null, jsonValue(201, ID, 3), null)); // json_values.MAX_DEPTH
    assertNull(json.decode(null, jsonValue(2, "{" + ID + "}", 3), null));
  }
}
