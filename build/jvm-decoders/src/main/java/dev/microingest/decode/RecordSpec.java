package dev.microingest.decode;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What a pipeline declares about its records, as microingest's `decode.jvm_spec.spec` writes it: {"format": "json" or
 * "avro", "max_value_bytes": n, "key_required": bool, "timestamp_ms": [lowest, highest], "timestamp_us": [lowest,
 * highest], "fields": [{"name", "type", "required"}, with "items" for an array, "precision", "scale" and "rounding"
 * for decimals, "path" (a list) when not the name alone, "source" ("key" or "header") and "header" for a field from
 * the record; ...]}; for Avro, "writers": {schema id: plan} ({@link
 * AvroWriterPlan}); in fault-injection tests "fault" and "fault_once" ({@link Faults}); "jar", the jar's file name a
 * Spark Connect job expects its session to run.
 */
final class RecordSpec {
  enum Type {
    STRING,
    INTEGER,
    DOUBLE,
    BOOLEAN,
    TIMESTAMP,
    DECIMAL,
    DATE,
    UUID,
    BYTES,
    JSON,
    ARRAY
  }

  /** Where a field's value is: the record's value (at its path), its key, or one of its headers. */
  enum Source {
    VALUE,
    KEY,
    HEADER
  }

  /**
   * A declared field: an array's items' type; a decimal's (or decimal array's) precision and scale, and whether it
   * rounds half to even (else refuses); the names and array indexes leading to it in the value; the header it takes.
   */
  record Field(
      String name,
      Type type,
      boolean required,
      int precision,
      int scale,
      boolean halfEven,
      Type items,
      List<String> path,
      Source source,
      String header) {
    /** Its scalar type: an array's items', else its own. */
    Type kind() {
      return type == Type.ARRAY ? items : type;
    }
  }

  String format;
  long maxValueBytes = -1;
  Boolean keyRequired;
  long lowestMillis;
  long highestMillis;
  long lowestMicros;
  long highestMicros;
  List<Field> fields;
  Map<Integer, AvroWriterPlan> writers = Map.of();
  String fault; // a fault-injection test's MICROINGEST_FAULT (Faults), or null
  String faultOnce;
  String jar; // the file name of the decoder's jar the job sent its Spark Connect session, or null

  private RecordSpec() {}

  static RecordSpec parse(String text) {
    RecordSpec spec = new RecordSpec();
    long[] millis = null;
    long[] micros = null;
    try (JsonParser p = new JsonFactory().createParser(text)) {
      expect(p.nextToken(), JsonToken.START_OBJECT, text);
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        p.nextToken();
        switch (name) {
          case "format" -> spec.format = p.getText();
          case "max_value_bytes" -> spec.maxValueBytes = p.getLongValue();
          case "key_required" -> spec.keyRequired = p.getBooleanValue();
          case "timestamp_ms" -> millis = pair(p, text);
          case "timestamp_us" -> micros = pair(p, text);
          case "fields" -> spec.fields = fields(p, text);
          case "writers" -> spec.writers = writers(p, text);
          case "fault" -> spec.fault = p.getText();
          case "fault_once" -> spec.faultOnce = p.getText();
          case "jar" -> spec.jar = p.getText();
          default -> throw new IllegalArgumentException("unknown key '" + name + "' in decoding spec " + text);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException("decoding spec is not JSON: " + text, e);
    }
    if (spec.format == null
        || spec.maxValueBytes < 0
        || spec.keyRequired == null
        || millis == null
        || micros == null
        || spec.fields == null) {
      throw new IllegalArgumentException("decoding spec misses a key: " + text);
    }
    spec.lowestMillis = millis[0];
    spec.highestMillis = millis[1];
    spec.lowestMicros = micros[0];
    spec.highestMicros = micros[1];
    for (AvroWriterPlan plan : spec.writers.values()) {
      plan.check(spec.fields);
    }
    return spec;
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
      out.add(field(p, text));
    }
    return List.copyOf(out);
  }

  /** The declared field whose object the parser is at (its START_OBJECT), leaving it at the object's end. */
  static Field field(JsonParser p, String text) throws IOException {
    expect(p.currentToken(), JsonToken.START_OBJECT, text);
    String name = null;
    Type type = null;
    boolean required = false;
    int precision = -1;
    int scale = -1;
    boolean halfEven = false;
    Type items = null;
    List<String> path = null;
    Source source = Source.VALUE;
    String header = null;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String key = p.currentName();
      p.nextToken();
      switch (key) {
        case "name" -> name = p.getText();
        case "type" -> type = Type.valueOf(p.getText().toUpperCase(java.util.Locale.ROOT));
        case "required" -> required = p.getBooleanValue();
        case "precision" -> precision = p.getIntValue();
        case "scale" -> scale = p.getIntValue();
        case "rounding" -> halfEven = "half_even".equals(p.getText());
        case "items" -> items = Type.valueOf(p.getText().toUpperCase(java.util.Locale.ROOT));
        case "path" -> path = strings(p, text);
        case "source" -> source = Source.valueOf(p.getText().toUpperCase(java.util.Locale.ROOT));
        case "header" -> header = p.getText();
        default -> throw new IllegalArgumentException("unknown field key '" + key + "' in decoding spec " + text);
      }
    }
    if (name == null || type == null) {
      throw new IllegalArgumentException("a field without name or type in decoding spec " + text);
    }
    if ((type == Type.ARRAY) != (items != null) || items == Type.ARRAY) {
      throw new IllegalArgumentException("an array without its items' type in decoding spec " + text);
    }
    if ((type == Type.DECIMAL || items == Type.DECIMAL) && (precision < 1 || scale < 0 || scale > precision)) {
      throw new IllegalArgumentException("a decimal without precision and scale in decoding spec " + text);
    }
    if ((source == Source.HEADER) != (header != null)) {
      throw new IllegalArgumentException("a header field without its header in decoding spec " + text);
    }
    return new Field(
        name, type, required, precision, scale, halfEven, items, path == null ? List.of(name) : path, source, header);
  }

  private static List<String> strings(JsonParser p, String text) throws IOException {
    expect(p.currentToken(), JsonToken.START_ARRAY, text);
    List<String> out = new ArrayList<>();
    while (p.nextToken() == JsonToken.VALUE_STRING) {
      out.add(p.getText());
    }
    expect(p.currentToken(), JsonToken.END_ARRAY, text);
    if (out.isEmpty()) {
      throw new IllegalArgumentException("an empty path in decoding spec " + text);
    }
    return List.copyOf(out);
  }

  private static Map<Integer, AvroWriterPlan> writers(JsonParser p, String text) throws IOException {
    expect(p.currentToken(), JsonToken.START_OBJECT, text);
    Map<Integer, AvroWriterPlan> out = new HashMap<>();
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      int id = Integer.parseInt(p.currentName());
      p.nextToken();
      out.put(id, AvroWriterPlan.parse(p, text));
    }
    return Map.copyOf(out);
  }

  static void expect(JsonToken got, JsonToken want, String text) {
    if (got != want) {
      throw new IllegalArgumentException("decoding spec: expected " + want + ", got " + got + " in " + text);
    }
  }
}
