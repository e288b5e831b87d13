package dev.microingest.decode;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.math.BigDecimal;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A declared {@code json} field's value kept whole, as the text the reference stages for jsonb (json_values.jsonable
 * then json_text): strings escaped as Python's json.dumps(ensure_ascii=False) escapes them, an integer as its digits
 * (JSON's -0 as "-0"), any other number as Python's str() of its exact Decimal, an object's repeated name in its first
 * place with its last value, no space anywhere. Declined, as the reference refuses them: text with NUL or a lone
 * surrogate, containers nested 200 deep, numbers past what Postgres numeric holds.
 */
final class JsonText {
  static final int MAX_DEPTH = 200; // json_values.MAX_DEPTH
  private static final long MAX_WHOLE_DIGITS = 131_072; // json_values.MAX_WHOLE_DIGITS
  private static final int MAX_PLACES = 16_383; // json_values.MAX_PLACES

  private JsonText() {}

  /** The value starting at {@code token} as its staged text, or null to decline. */
  static String read(JsonParser p, JsonToken token) throws IOException {
    StringBuilder out = new StringBuilder();
    return write(p, token, 0, out) ? out.toString() : null;
  }

  private static boolean write(JsonParser p, JsonToken token, int depth, StringBuilder out) throws IOException {
    switch (token) {
      case VALUE_NULL -> out.append("null");
      case VALUE_TRUE -> out.append("true");
      case VALUE_FALSE -> out.append("false");
      case VALUE_NUMBER_INT -> out.append(p.getText());
      case VALUE_NUMBER_FLOAT -> {
        String number = number(p.getText());
        if (number == null) {
          return false;
        }
        out.append(number);
      }
      case VALUE_STRING -> {
        String text = RecordDecoder.storableText(p.getText());
        if (text == null) {
          return false;
        }
        quote(text, out);
      }
      case START_ARRAY -> {
        if (depth >= MAX_DEPTH) {
          return false;
        }
        out.append('[');
        JsonToken next;
        for (int i = 0; (next = p.nextToken()) != JsonToken.END_ARRAY; i++) {
          if (i > 0) {
            out.append(',');
          }
          if (!write(p, next, depth + 1, out)) {
            return false;
          }
        }
        out.append(']');
      }
      case START_OBJECT -> {
        if (depth >= MAX_DEPTH) {
          return false;
        }
        Map<String, String> members = new LinkedHashMap<>(); // a name again keeps its place, as a dict's does
        while (p.nextToken() == JsonToken.FIELD_NAME) {
          String name = RecordDecoder.storableText(p.currentName());
          JsonToken next = p.nextToken();
          StringBuilder value = new StringBuilder();
          if (name == null || !write(p, next, depth + 1, value)) {
            return false;
          }
          members.put(name, value.toString());
        }
        object(members, out);
      }
      default -> {
        return false;
      }
    }
    return true;
  }

  /** str() of the number's exact Decimal, or null past Postgres numeric's digits. */
  private static String number(String text) {
    BigDecimal exact = new BigDecimal(text);
    long adjusted = (long) exact.precision() - exact.scale() - 1;
    if (adjusted >= MAX_WHOLE_DIGITS || exact.scale() > MAX_PLACES) {
      return null;
    }
    String shown = exact.toString(); // the same scientific-notation rule as Python's Decimal
    return exact.signum() == 0 && text.charAt(0) == '-' ? "-" + shown : shown; // Decimal keeps the sign of zero
  }

  /** An object of the members' names (storable text) and values (JSON text), in the map's order. */
  static void object(Map<String, String> members, StringBuilder out) {
    out.append('{');
    boolean first = true;
    for (Map.Entry<String, String> member : members.entrySet()) {
      if (!first) {
        out.append(',');
      }
      first = false;
      quote(member.getKey(), out);
      out.append(':').append(member.getValue());
    }
    out.append('}');
  }

  static void quote(String text, StringBuilder out) {
    out.append('"');
    for (int i = 0, n = text.length(); i < n; i++) {
      char c = text.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        case '\b' -> out.append("\\b");
        case '\f' -> out.append("\\f");
        default -> {
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    out.append('"');
  }
}
