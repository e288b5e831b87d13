package dev.microingest.decode;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import java.io.IOException;
import java.util.HashMap;
import java.util.Map;

/**
 * One Kafka record's key and JSON value → the key as staged and the declared fields, typed, or null: "declined".
 *
 * <p>A record is taken only when microingest's reference decoder (`decode.records.RecordProcessor`, Python) would
 * stage exactly these values; every other record is declined and goes to the reference, which alone names dead letters
 * and their reasons. Declining is always safe, so anything unusual is declined rather than reproduced: tombstones, values
 * over the size limit, a BOM or a NUL byte anywhere, an exponent of 16 digits, nesting past 500, JSON that Python reads but strict JSON does not
 * (NaN, Infinity), a string field holding NUL or a lone surrogate, a fraction for an integer, a double that is not
 * finite, a timestamp given as text or a fraction or outside the years 1 to 9999, a required field missing or null, a
 * field of the wrong JSON type.
 *
 * <p>Values: strings as Java strings; integers as Long; doubles as Double, the nearest to the number's text (as Python's
 * float() gives it; "-0" is -0.0); booleans; timestamps as Long microseconds since the epoch (a JSON integer is epoch
 * milliseconds, microingest's convention).
 */
public final class StrictJsonDecoder {
  private static final String KEY_HEX_PREFIX = "\\x"; // storable.KEY_HEX_PREFIX
  // Below Python's recursion limit with room for the frames already on its stack (arrow_json.MAX_BRACKETS).
  private static final int MAX_DEPTH = 500;
  private static final int HUGE_EXPONENT_DIGITS = 16;
  private static final JsonFactory FACTORY =
      JsonFactory.builder()
          .streamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(MAX_DEPTH).build())
          .build();

  private final JsonRecordSpec spec;
  private final JsonRecordSpec.Field[] fields;
  private final Map<String, Integer> index = new HashMap<>();

  public StrictJsonDecoder(String specJson) {
    this.spec = JsonRecordSpec.parse(specJson);
    this.fields = spec.fields.toArray(new JsonRecordSpec.Field[0]);
    for (int i = 0; i < fields.length; i++) {
      index.put(fields[i].name(), i);
    }
  }

  /**
   * Refuse to decode for a job that sent another build of this jar: a Spark Connect session keeps the classes of the
   * first jar it was sent, and a job's spec is only right for its own build (`spark.jvm_decode.prepare`).
   */
  void checkBuild() {
    if (spec.jar == null) {
      return;
    }
    String loaded = String.valueOf(StrictJsonDecoder.class.getProtectionDomain().getCodeSource().getLocation());
    if (!loaded.endsWith("/" + spec.jar)) {
      throw new IllegalStateException(
          "microingest's decoder in this Spark session was loaded from "
              + loaded
              + ", not the job's "
              + spec.jar
              + ": another build of microingest used this session before");
    }
  }

  /** Fire the fault the spec carries, else the executor's environment sets, if any (tests only). */
  void fault() {
    if (spec.fault != null) {
      Faults.fire(spec.fault, spec.faultOnce);
    } else {
      Faults.fire(System.getenv("MICROINGEST_FAULT"), System.getenv("MICROINGEST_FAULT_ONCE"));
    }
  }

  /** [key, field values...], or null when the reference must decode this record. */
  public Object[] decode(byte[] key, byte[] value) {
    if (value == null || value.length > spec.maxValueBytes || value.length == 0) {
      return null;
    }
    Object[] out = new Object[fields.length + 1];
    if (key == null) {
      if (spec.keyRequired) {
        return null;
      }
    } else {
      out[0] = keyText(key);
    }
    // A NUL byte is never valid JSON text, and without one Jackson cannot mistake the bytes for UTF-16 or UTF-32.
    if (hasNulOrBom(value) || hasHugeExponent(value) || !Utf8.isValid(value)) {
      return null;
    }
    try (JsonParser p = FACTORY.createParser(value)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        return null;
      }
      JsonToken token;
      while ((token = p.nextToken()) == JsonToken.FIELD_NAME) {
        Integer at = index.get(p.currentName());
        JsonToken kind = p.nextToken();
        if (at == null) {
          p.skipChildren();
          continue;
        }
        JsonRecordSpec.Field field = fields[at];
        if (kind == JsonToken.VALUE_NULL) {
          out[at + 1] = null; // a later duplicate wins, as in Python's dict
          continue;
        }
        Object typed = typed(field.type(), kind, p);
        if (typed == null) {
          return null;
        }
        out[at + 1] = typed;
      }
      if (token != JsonToken.END_OBJECT || p.nextToken() != null) {
        return null;
      }
    } catch (IOException | RuntimeException e) {
      return null; // Jackson refused the text somewhere: the reference says why
    }
    for (int i = 0; i < fields.length; i++) {
      if (fields[i].required() && out[i + 1] == null) {
        return null;
      }
    }
    return out;
  }

  private Object typed(JsonRecordSpec.Type type, JsonToken kind, JsonParser p) throws IOException {
    switch (type) {
      case STRING:
        return kind == JsonToken.VALUE_STRING ? storableText(p.getText()) : null;
      case INTEGER:
        if (kind != JsonToken.VALUE_NUMBER_INT) {
          return null;
        }
        JsonParser.NumberType size = p.getNumberType();
        return size == JsonParser.NumberType.INT || size == JsonParser.NumberType.LONG ? p.getLongValue() : null;
      case DOUBLE:
        if (kind != JsonToken.VALUE_NUMBER_INT && kind != JsonToken.VALUE_NUMBER_FLOAT) {
          return null;
        }
        double d = Double.parseDouble(p.getText()); // correctly rounded from the text, as Python's float()
        return Double.isFinite(d) ? d : null;
      case BOOLEAN:
        return kind == JsonToken.VALUE_TRUE ? Boolean.TRUE : kind == JsonToken.VALUE_FALSE ? Boolean.FALSE : null;
      case TIMESTAMP:
        if (kind != JsonToken.VALUE_NUMBER_INT) {
          return null; // ISO-8601 text and fractions of a millisecond: the reference's grammar and rounding
        }
        JsonParser.NumberType width = p.getNumberType();
        if (width != JsonParser.NumberType.INT && width != JsonParser.NumberType.LONG) {
          return null;
        }
        long millis = p.getLongValue();
        return millis >= spec.lowestMillis && millis <= spec.highestMillis ? millis * 1000L : null;
      default:
        return null;
    }
  }

  /** The text, when Postgres can store it: no NUL, no lone surrogate. */
  private static String storableText(String text) {
    for (int i = 0, n = text.length(); i < n; i++) {
      char c = text.charAt(i);
      if (c == 0) {
        return null;
      }
      if (Character.isHighSurrogate(c)) {
        if (i + 1 < n && Character.isLowSurrogate(text.charAt(i + 1))) {
          i++;
          continue;
        }
        return null;
      }
      if (Character.isLowSurrogate(c)) {
        return null;
      }
    }
    return text;
  }

  /** storable.key_text: the key's text, or its bytes in hex when it is not valid UTF-8, holds NUL, or could be
   * mistaken for the hex form. */
  static String keyText(byte[] key) {
    if (!Utf8.isValid(key)) {
      return Utf8.hex(KEY_HEX_PREFIX, key);
    }
    String text = new String(key, java.nio.charset.StandardCharsets.UTF_8);
    if (text.indexOf('\0') >= 0 || text.startsWith(KEY_HEX_PREFIX)) {
      return Utf8.hex(KEY_HEX_PREFIX, key);
    }
    return text;
  }

  /**
   * Whether an exponent of 16 digits or more (after leading zeros) follows an 'e' or 'E' anywhere in the value
   * (batch_columns.HUGE_EXPONENT). Python's Decimal refuses exponents from about 10^18, which Jackson reads as 0, -0
   * or infinity, even in fields nobody declared; text holding such a pattern is declined too, harmlessly.
   */
  static boolean hasHugeExponent(byte[] value) {
    for (int i = 0; i < value.length; i++) {
      if (value[i] != 'e' && value[i] != 'E') {
        continue;
      }
      int j = i + 1;
      if (j < value.length && (value[j] == '+' || value[j] == '-')) {
        j++;
      }
      while (j < value.length && value[j] == '0') {
        j++;
      }
      int digits = 0;
      while (j < value.length && value[j] >= '0' && value[j] <= '9') {
        digits++;
        j++;
      }
      if (digits >= HUGE_EXPONENT_DIGITS) {
        return true;
      }
    }
    return false;
  }

  private static boolean hasNulOrBom(byte[] value) {
    if (value.length >= 3 && value[0] == (byte) 0xEF && value[1] == (byte) 0xBB && value[2] == (byte) 0xBF) {
      return true;
    }
    for (byte b : value) {
      if (b == 0) {
        return true;
      }
    }
    return false;
  }
}
