package dev.microingest.decode;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;

/**
 * What a pipeline declares about its JSON records, as microingest's `spark.jvm_json.spec` writes it: {"max_value_bytes":
 * n, "key_required": bool, "timestamp_ms": [lowest, highest], "fields": [{"name", "type", "required"}, ...]}, and
 * in fault-injection tests "fault" and "fault_once" ({@link Faults}); "jar", the jar's file name a Spark Connect job
 * expects its session to run.
 */
final class JsonRecordSpec {
  enum Type {
    STRING,
    INTEGER,
    DOUBLE,
    BOOLEAN,
    TIMESTAMP
  }

  record Field(String name, Type type, boolean required) {}

  final long maxValueBytes;
  final boolean keyRequired;
  final long lowestMillis;
  final long highestMillis;
  final List<Field> fields;
  final String fault; // a fault-injection test's MICROINGEST_FAULT (Faults), or null
  final String faultOnce;
  final String jar; // the file name of the decoder's jar the job sent its Spark Connect session, or null

  private JsonRecordSpec(
      long maxValueBytes,
      boolean keyRequired,
      long lowestMillis,
      long highestMillis,
      List<Field> fields,
      String fault,
      String faultOnce,
      String jar) {
    this.jar = jar;
    this.fault = fault;
    this.faultOnce = faultOnce;
    this.maxValueBytes = maxValueBytes;
    this.keyRequired = keyRequired;
    this.lowestMillis = lowestMillis;
    this.highestMillis = highestMillis;
    this.fields = List.copyOf(fields);
  }

  static JsonRecordSpec parse(String text) {
    long maxValueBytes = -1;
    Boolean keyRequired = null;
    long[] millis = null;
    List<Field> fields = null;
    String fault = null;
    String faultOnce = null;
    String jar = null;
    try (JsonParser p = new JsonFactory().createParser(text)) {
      expect(p.nextToken(), JsonToken.START_OBJECT, text);
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        p.nextToken();
        switch (name) {
          case "max_value_bytes" -> maxValueBytes = p.getLongValue();
          case "key_required" -> keyRequired = p.getBooleanValue();
          case "timestamp_ms" -> millis = pair(p, text);
          case "fields" -> fields = fields(p, text);
          case "fault" -> fault = p.getText();
          case "fault_once" -> faultOnce = p.getText();
          case "jar" -> jar = p.getText();
          default -> throw new IllegalArgumentException("unknown key '" + name + "' in decoding spec " + text);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException("decoding spec is not JSON: " + text, e);
    }
    if (maxValueBytes < 0 || keyRequired == null || millis == null || fields == null) {
      throw new IllegalArgumentException("decoding spec misses a key: " + text);
    }
    return new JsonRecordSpec(maxValueBytes, keyRequired, millis[0], millis[1], fields, fault, faultOnce, jar);
  }

  private static long[] pair(JsonParser p, String text) throws IOException {
    expect(p.currentToken(), JsonToken.START_ARRAY, text);
    p.nextToken();
    long low = p.getLongValue();
    p.nextToken();
    long high = p.getLongValue();
    expect(p.nextToken(), JsonToken.END_ARRAY, text);
    return new long[] {low, high};
  }

  private static List<Field> fields(JsonParser p, String text) throws IOException {
    expect(p.currentToken(), JsonToken.START_ARRAY, text);
    List<Field> out = new ArrayList<>();
    while (p.nextToken() == JsonToken.START_OBJECT) {
      String name = null;
      Type type = null;
      boolean required = false;
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String key = p.currentName();
        p.nextToken();
        switch (key) {
          case "name" -> name = p.getText();
          case "type" -> type = Type.valueOf(p.getText().toUpperCase(java.util.Locale.ROOT));
          case "required" -> required = p.getBooleanValue();
          default -> throw new IllegalArgumentException("unknown field key '" + key + "' in decoding spec " + text);
        }
      }
      if (name == null || type == null) {
        throw new IllegalArgumentException("a field without name or type in decoding spec " + text);
      }
      out.add(new Field(name, type, required));
    }
    return out;
  }

  private static void expect(JsonToken got, JsonToken want, String text) {
    if (got != want) {
      throw new IllegalArgumentException("decoding spec: expected " + want + ", got " + got + " in " + text);
    }
  }
}
