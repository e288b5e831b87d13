package dev.microingest.decode;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * One Kafka record's key and value → the key as staged and the declared fields, typed, or null: "declined".
 *
 * <p>A record is taken only when microingest's reference decoder (`decode.records.RecordProcessor`, Python) would
 * stage exactly these values; every other record is declined and goes to the reference, which alone names dead letters
 * and their reasons. Declining is always safe, so anything unusual is declined rather than reproduced.
 *
 * <p>Values: strings as Java strings; integers as Long; doubles as Double; booleans; timestamps as Long microseconds
 * since the epoch; decimals as BigDecimal of the declared scale; dates as LocalDate; UUIDs as their 16 bytes; bytes
 * as they are; arrays as Lists of their items. The key is staged as `storable.key_text` stages it.
 */
public abstract class RecordDecoder {
  private static final String KEY_HEX_PREFIX = "\\x"; // storable.KEY_HEX_PREFIX
  private static final String JAR_KEY = ",\"jar\":\"";

  final RecordSpec spec;
  private final int[] headerSlots;
  private final String[] headerNames;

  RecordDecoder(RecordSpec spec) {
    this.spec = spec;
    List<Integer> slots = new ArrayList<>();
    for (int i = 0; i < spec.fields.size(); i++) {
      if (spec.fields.get(i).source() == RecordSpec.Source.HEADER) {
        slots.add(i);
      }
    }
    this.headerSlots = slots.stream().mapToInt(Integer::intValue).toArray();
    this.headerNames = slots.stream().map(i -> spec.fields.get(i).header()).toArray(String[]::new);
  }

  /** The decoder of a spec's format. */
  public static RecordDecoder of(String specJson) {
    RecordSpec spec = RecordSpec.parse(specJson);
    return switch (spec.format) {
      case "json" -> new StrictJsonDecoder(spec, specJson);
      case "avro" -> new StrictAvroDecoder(spec);
      default -> throw new IllegalArgumentException("decoding spec names an unknown format: " + spec.format);
    };
  }

  /**
   * [key, field values...], or null when the reference must decode this record; {@code headers}: the record's
   * headers as Spark's to_json writes them, or null when it has none.
   */
  public abstract Object[] decode(byte[] key, byte[] value, String headers);

  /**
   * The record's output with its key staged, before any value is decoded, or null: a tombstone, an empty value or one
   * over the size limit, a missing key where one is required.
   */
  final Object[] started(byte[] key, byte[] value) {
    if (value == null || value.length > spec.maxValueBytes || value.length == 0) {
      return null;
    }
    Object[] out = new Object[spec.fields.size() + 1];
    if (key == null) {
      if (spec.keyRequired) {
        return null;
      }
    } else {
      out[0] = keyText(key);
    }
    return out;
  }

  /** The fields from the record's key and headers (record_fields.record_field); false to decline. */
  final boolean fromRecord(Object[] out, byte[] key, String headers) {
    for (int i = 0; i < spec.fields.size(); i++) {
      if (spec.fields.get(i).source() == RecordSpec.Source.KEY) {
        out[i + 1] = key == null ? null : spec.fields.get(i).type() == RecordSpec.Type.STRING ? out[0] : key;
      }
    }
    if (headerSlots.length == 0) {
      return true;
    }
    byte[][] values = RecordHeaders.lastValues(headers, headerNames);
    if (values == null) {
      return false;
    }
    for (int h = 0; h < headerSlots.length; h++) {
      byte[] header = values[h];
      if (header != null && spec.fields.get(headerSlots[h]).type() == RecordSpec.Type.STRING) {
        if (!Utf8.isValid(header)) {
          return false; // the reference's wrong_type
        }
        String text = storableText(new String(header, StandardCharsets.UTF_8));
        if (text == null) {
          return false; // the reference's unstorable
        }
        out[headerSlots[h] + 1] = text;
      } else {
        out[headerSlots[h] + 1] = header;
      }
    }
    return true;
  }

  /** The output, when every required field has a value; else null. */
  final Object[] finished(Object[] out) {
    for (int i = 0; i < spec.fields.size(); i++) {
      if (spec.fields.get(i).required() && out[i + 1] == null) {
        return null;
      }
    }
    return out;
  }

  /**
   * Refuse to decode for a job that sent another build of this jar: a Spark Connect session keeps the classes of the
   * first jar it was sent, and a job's spec is only right for its own build (`spark.jvm_decode.prepare`). Read from
   * the spec's text before it is parsed ({@code "jar":"<file name>"}, as `decode.jvm_spec.spec` writes it).
   */
  static void checkBuild(String specJson) {
    int at = specJson.lastIndexOf(JAR_KEY);
    if (at < 0) {
      return;
    }
    int start = at + JAR_KEY.length();
    int end = specJson.indexOf('"', start);
    String wanted = specJson.substring(start, end < 0 ? specJson.length() : end);
    String loaded = String.valueOf(RecordDecoder.class.getProtectionDomain().getCodeSource().getLocation());
    if (!loaded.endsWith("/" + wanted)) {
      throw new IllegalStateException(
          "microingest's decoder in this Spark session was loaded from "
              + loaded
              + ", not the job's "
              + wanted
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

  /** The text, when Postgres can store it: no NUL, no lone surrogate. */
  static String storableText(String text) {
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

  /**
   * storable.key_text: the key's text, or its bytes in hex when it is not valid UTF-8, holds NUL, or could be mistaken
   * for the hex form.
   */
  static String keyText(byte[] key) {
    if (!Utf8.isValid(key)) {
      return Utf8.hex(KEY_HEX_PREFIX, key);
    }
    String text = new String(key, StandardCharsets.UTF_8);
    if (text.indexOf('\0') >= 0 || text.startsWith(KEY_HEX_PREFIX)) {
      return Utf8.hex(KEY_HEX_PREFIX, key);
    }
    return text;
  }
}
