package dev.microingest.decode;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
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
    String wrong = SPEC.replace("[\"long\",1000]", "[\"string\"]");
    assertThrows(IllegalArgumentException.class, () -> RecordDecoder.of(wrong));
    String dangling = SPEC.replace("[\"map\",7]", "[\"map\",70]");
    assertThrows(IllegalArgumentException.class, () -> RecordDecoder.of(dangling));
  }
}
