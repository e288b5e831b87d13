package dev.microingest.decode;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;

/**
 * A value a transform_sql statement gives a declared decimal, decimal array or json field, held to the reference
 * decoder's rules as microingest's `decode.held_values.held` holds it: null for null (and for JSON's null), else
 * {@link #LANDS} and the staged text the reference gives, digit for digit; or {@link #REFUSED} where the JVM leaves the
 * value to the reference, which then holds the batch's values itself and names each refusal in its own words
 * (`spark.sql_transform`). Leaving is always safe, so anything unusual is left.
 *
 * <p>A decimal comes from Spark's decimal (its digits), an integer, a double or float (its exact binary value) or
 * decimal text, fitted as {@link ExactDecimal} fits a record's; a decimal array's elements each so, null kept; json
 * text is read and written as {@link JsonText} keeps a record's json field.
 */
final class HeldValue {
  static final String LANDS = "ok:"; // held_values.LANDS
  static final String REFUSED = "no:"; // held_values.REFUSED
  static final String LEFT = REFUSED + "left to the reference decoder";

  private final RecordSpec.Field field;

  private HeldValue(RecordSpec.Field field) {
    this.field = field;
  }

  /** The field of a held spec, {"field": {...} as a decoding spec's fields are written, "jar": ...}. */
  static HeldValue of(String spec) {
    RecordSpec.Field field = null;
    try (JsonParser p = new JsonFactory().createParser(spec)) {
      RecordSpec.expect(p.nextToken(), JsonToken.START_OBJECT, spec);
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        p.nextToken();
        switch (name) {
          case "field" -> field = RecordSpec.field(p, spec);
          case "jar" -> p.getText(); // RecordDecoder.checkBuild reads it from the text
          default -> throw new IllegalArgumentException("unknown key '" + name + "' in held spec " + spec);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException("held spec is not JSON: " + spec, e);
    }
    if (field == null
        || !(field.type() == RecordSpec.Type.JSON || field.kind() == RecordSpec.Type.DECIMAL)) {
      throw new IllegalArgumentException("held spec names no decimal or json field: " + spec);
    }
    return new HeldValue(field);
  }

  String held(Object value) {
    if (value == null) {
      return null;
    }
    if (field.type() == RecordSpec.Type.JSON) {
      return value instanceof String text ? json(text) : LEFT;
    }
    if (field.type() != RecordSpec.Type.ARRAY) {
      BigDecimal fitted = decimal(value);
      return fitted == null ? LEFT : LANDS + fitted.toPlainString();
    }
    if (!(value instanceof scala.collection.Seq<?> items)) {
      return LEFT;
    }
    StringBuilder out = new StringBuilder(LANDS).append('[');
    for (int i = 0, n = items.length(); i < n; i++) {
      if (i > 0) {
        out.append(',');
      }
      Object item = items.apply(i);
      if (item == null) {
        out.append("null");
        continue;
      }
      BigDecimal fitted = decimal(item);
      if (fitted == null) {
        return LEFT;
      }
      out.append(fitted.toPlainString());
    }
    return out.append(']').toString();
  }

  /** The value fitted to the declared decimal, or null to leave it. */
  private BigDecimal decimal(Object value) {
    BigDecimal exact;
    if (value instanceof BigDecimal d) {
      exact = d;
    } else if (value instanceof Long || value instanceof Integer || value instanceof Short || value instanceof Byte) {
      exact = BigDecimal.valueOf(((Number) value).longValue());
    } else if (value instanceof Double || value instanceof Float) {
      double d = ((Number) value).doubleValue();
      if (!Double.isFinite(d)) {
        return null;
      }
      exact = new BigDecimal(d); // its exact binary value, as Python's Decimal(float)
    } else if (value instanceof String text) {
      exact = ExactDecimal.text(text);
      if (exact == null) {
        return null;
      }
    } else {
      return null; // a boolean, a date, a struct...: the reference's TypeError
    }
    return ExactDecimal.fit(exact, field.precision(), field.scale(), field.halfEven());
  }

  /** JSON text read as a record's json field is (the same screen and parser), or left. */
  private static String json(String text) {
    byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
    if (!StrictJsonDecoder.screened(bytes)) {
      return LEFT;
    }
    try (JsonParser p = StrictJsonDecoder.FACTORY.createParser(bytes)) {
      JsonToken first = p.nextToken();
      String kept = first == null ? null : JsonText.read(p, first);
      if (kept == null || p.nextToken() != null) {
        return LEFT;
      }
      return first == JsonToken.VALUE_NULL ? null : LANDS + kept;
    } catch (IOException | RuntimeException e) {
      return LEFT; // Jackson refused the text: the reference says why
    }
  }
}
