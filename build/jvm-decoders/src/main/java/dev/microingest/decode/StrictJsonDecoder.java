package dev.microingest.decode;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import java.io.IOException;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;

/**
 * JSON values: a record is declined when it holds a BOM or a NUL byte anywhere, an exponent of 16 digits, nesting past
 * 500, JSON that Python reads but strict JSON does not (NaN, Infinity), a string field holding NUL or a lone surrogate,
 * a fraction for an integer, a double that is not finite, a timestamp given as a fraction of a millisecond, as text in a
 * form {@link IsoTimestamp} leaves to the reference, or outside the years 1 to 9999, a required field missing or null, a
 * field of the wrong JSON type ({@link RecordDecoder}), a decimal, date or UUID the reference refuses or reads otherwise
 * ({@link ExactDecimal}, {@link IsoDate}, {@link UuidText}).
 *
 * <p>A double is the nearest to the number's text (as Python's float() gives it; "-0" is -0.0); a JSON integer given
 * for a timestamp is epoch milliseconds, microingest's convention, and a string ISO-8601 text.
 */
public final class StrictJsonDecoder extends RecordDecoder {
  // Below Python's recursion limit with room for the frames already on its stack (arrow_json.MAX_BRACKETS).
  private static final int MAX_DEPTH = 500;
  private static final int HUGE_EXPONENT_DIGITS = 16;
  static final JsonFactory FACTORY =
      JsonFactory.builder()
          .streamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(MAX_DEPTH).build())
          .build();

  private final RecordSpec.Field[] fields;
  private final PathTree paths;

  StrictJsonDecoder(RecordSpec spec, String specText) {
    super(spec);
    this.fields = spec.fields.toArray(new RecordSpec.Field[0]);
    this.paths = new PathTree(spec.fields, specText);
  }

  @Override
  public Object[] decode(byte[] key, byte[] value, String headers) {
    Object[] out = started(key, value);
    if (out == null) {
      return null;
    }
    if (!screened(value)) {
      return null;
    }
    try (JsonParser p = FACTORY.createParser(value)) {
      if (p.nextToken() != JsonToken.START_OBJECT || !read(paths.root, JsonToken.START_OBJECT, p, out)) {
        return null;
      }
      if (p.nextToken() != null) {
        return null;
      }
    } catch (IOException | RuntimeException e) {
      return null; // Jackson refused the text somewhere: the reference says why
    }
    return fromRecord(out, key, headers) ? finished(out) : null;
  }

  /**
   * The value at {@code node}, whose first token {@code kind} the parser is at, into the fields at or below it; false
   * to decline. Leaves the parser at the value's last token.
   */
  private boolean read(PathTree.Node node, JsonToken kind, JsonParser p, Object[] out) throws IOException {
    if (node.isLeaf()) {
      RecordSpec.Field field = fields[node.field];
      if (kind == JsonToken.VALUE_NULL) {
        out[node.field + 1] = null; // a later duplicate wins, as in Python's dict
        return true;
      }
      Object typed = field.type() == RecordSpec.Type.ARRAY ? array(field, kind, p) : typed(field.type(), field, kind, p);
      out[node.field + 1] = typed;
      return typed != null;
    }
    for (int f : node.below) {
      out[f + 1] = null; // absent until found: this value replaces any earlier one of the same name
    }
    switch (kind) {
      case VALUE_NULL:
        return true;
      case START_OBJECT:
        while (p.nextToken() == JsonToken.FIELD_NAME) {
          PathTree.Node next = node.byName.get(p.currentName());
          JsonToken token = p.nextToken();
          if (next == null) {
            p.skipChildren();
          } else if (!read(next, token, p, out)) {
            return false;
          }
        }
        return p.currentToken() == JsonToken.END_OBJECT;
      case START_ARRAY:
        if (!node.onlyIndexes) {
          return false; // a name to look up in an array: the reference's wrong_type
        }
        JsonToken token;
        for (int i = 0; (token = p.nextToken()) != JsonToken.END_ARRAY; i++) {
          PathTree.Node next = node.byIndex.get(i);
          if (next == null) {
            p.skipChildren();
          } else if (!read(next, token, p, out)) {
            return false;
          }
        }
        return true;
      default:
        return false; // a scalar where the path goes on: the reference's wrong_type
    }
  }

  /** An array field's items, null ones kept; null when it is no array or an item is not of the items' type. */
  private List<Object> array(RecordSpec.Field field, JsonToken kind, JsonParser p) throws IOException {
    if (kind != JsonToken.START_ARRAY) {
      return null;
    }
    List<Object> items = new ArrayList<>();
    JsonToken token;
    while ((token = p.nextToken()) != JsonToken.END_ARRAY) {
      if (token == JsonToken.VALUE_NULL) {
        items.add(null);
        continue;
      }
      Object item = typed(field.items(), field, token, p);
      if (item == null) {
        return null;
      }
      items.add(item);
    }
    return items;
  }

  private Object typed(RecordSpec.Type type, RecordSpec.Field field, JsonToken kind, JsonParser p)
      throws IOException {
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
        if (kind == JsonToken.VALUE_STRING) {
          return IsoTimestamp.micros(p.getText(), spec.lowestMicros, spec.highestMicros);
        }
        if (kind != JsonToken.VALUE_NUMBER_INT) {
          return null; // fractions of a millisecond: the reference's exact rounding
        }
        JsonParser.NumberType width = p.getNumberType();
        if (width != JsonParser.NumberType.INT && width != JsonParser.NumberType.LONG) {
          return null;
        }
        long millis = p.getLongValue();
        return millis >= spec.lowestMillis && millis <= spec.highestMillis ? millis * 1000L : null;
      case DECIMAL:
        BigDecimal exact =
            kind == JsonToken.VALUE_STRING
                ? ExactDecimal.text(p.getText())
                : kind == JsonToken.VALUE_NUMBER_INT || kind == JsonToken.VALUE_NUMBER_FLOAT
                    ? new BigDecimal(p.getText()) // the number's text, digit for digit
                    : null;
        return exact == null ? null : ExactDecimal.fit(exact, field.precision(), field.scale(), field.halfEven());
      case DATE:
        return kind == JsonToken.VALUE_STRING ? IsoDate.parse(p.getText()) : null;
      case UUID:
        return kind == JsonToken.VALUE_STRING ? UuidText.bytes(p.getText()) : null;
      case BYTES:
        return kind == JsonToken.VALUE_STRING ? Base64Text.bytes(p.getText()) : null;
      case JSON:
        return JsonText.read(p, kind);
      default:
        return null;
    }
  }

  /**
   * Whether the value passes what the reference checks of its bytes before parsing, in one pass: valid UTF-8 with no
   * BOM and no NUL byte (never valid JSON text; without one Jackson cannot mistake the bytes for UTF-16 or UTF-32), and
   * no exponent of 16 digits or more after leading zeros following an 'e' or 'E' anywhere (batch_columns.HUGE_EXPONENT:
   * Python's Decimal refuses exponents from about 10^18, which Jackson reads as 0, -0 or infinity, even in fields
   * nobody declared; text holding such a pattern is declined too, harmlessly).
   */
  static boolean screened(byte[] value) {
    int n = value.length;
    if (n >= 3 && value[0] == (byte) 0xEF && value[1] == (byte) 0xBB && value[2] == (byte) 0xBF) {
      return false;
    }
    for (int i = 0; i < n; ) {
      int b = value[i];
      if (b > 0) {
        i++;
        if ((b | 0x20) == 'e' && hugeExponentAt(value, i)) {
          return false;
        }
      } else if (b == 0) {
        return false;
      } else {
        int size = Utf8.sequence(value, i, n);
        if (size == 0) {
          return false;
        }
        i += size;
      }
    }
    return true;
  }

  /** Whether the exponent after an 'e' or 'E' ending before value[j] has 16 digits or more after leading zeros. */
  private static boolean hugeExponentAt(byte[] value, int j) {
    int n = value.length;
    if (j < n && (value[j] == '+' || value[j] == '-')) {
      j++;
    }
    while (j < n && value[j] == '0') {
      j++;
    }
    int digits = 0;
    while (j < n && value[j] >= '0' && value[j] <= '9') {
      digits++;
      j++;
    }
    return digits >= HUGE_EXPONENT_DIGITS;
  }
}
