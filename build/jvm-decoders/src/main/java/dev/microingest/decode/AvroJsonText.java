package dev.microingest.decode;

import static dev.microingest.decode.AvroInput.DECLINED;

import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A declared {@code json} field's Avro value as the text the reference stages for jsonb (fastavro's Python value, then
 * json_values.jsonable and json_text): a record or map an object (a record's fields in the writer's order; a map's key
 * again keeps its first place with its last value, as a dict does), an array an array, a string or an enum's symbol a
 * string escaped as {@link JsonText} escapes it, an int or long its digits, bytes and fixed their standard base64, a
 * decimal its exact number as Python's str() writes it, a date its ISO text, a UUID its hyphenated lower-case text.
 * Declined where the reference refuses the value or fastavro reads it its own way: NUL in text, containers nested 200
 * deep, a decimal of more digits than its writer's precision (fastavro rounds it), a day outside the years 1 to 9999,
 * a UUID's text in any form but the two {@link UuidText} reads, a float or double that is not finite. A float or double
 * is written as Python's repr() writes it ({@link PythonFloat}).
 */
final class AvroJsonText {
  private AvroJsonText() {}

  /** The value of node {@code t} that follows, as JSON text. */
  static String read(AvroWriterPlan plan, AvroInput in, int t) {
    StringBuilder out = new StringBuilder();
    write(plan, in, t, 0, out);
    return out.toString();
  }

  private static void write(AvroWriterPlan plan, AvroInput in, int t, int depth, StringBuilder out) {
    switch (plan.kind[t]) {
      case AvroWriterPlan.NULL -> out.append("null");
      case AvroWriterPlan.BOOLEAN -> out.append(in.readBoolean());
      case AvroWriterPlan.INT -> out.append(in.readInt());
      case AvroWriterPlan.LONG -> out.append(in.readLong());
      case AvroWriterPlan.FLOAT, AvroWriterPlan.DOUBLE -> {
        double d = StrictAvroDecoder.finite( // JSON has no such number: the reference's unstorable
            plan.kind[t] == AvroWriterPlan.FLOAT ? (double) in.readFloat() : in.readDouble());
        out.append(d == 0 && 1 / d < 0 ? "-0" : PythonFloat.repr(d)); // JSON's -0, as json_text writes it
      }
      case AvroWriterPlan.STRING -> text(in.readString(), out);
      case AvroWriterPlan.ENUM -> text(plan.symbols[t][in.readIndex(plan.symbols[t].length)], out);
      case AvroWriterPlan.BYTES -> base64(in.readBytes(in.readLength()), out);
      case AvroWriterPlan.FIXED -> base64(in.readBytes(plan.size[t]), out);
      case AvroWriterPlan.DECIMAL, AvroWriterPlan.FIXED_DECIMAL ->
          out.append(StrictAvroDecoder.exactDecimal(plan, in, t)); // BigDecimal's text is Python Decimal's str()
      case AvroWriterPlan.DATE ->
          out.append('"').append(StrictAvroDecoder.taken(StrictAvroDecoder.epochDay(in.readInt()))).append('"');
      case AvroWriterPlan.UUID -> {
        byte[] uuid = StrictAvroDecoder.taken(UuidText.bytes(in.readString()));
        out.append('"').append(UuidText.text(uuid)).append('"');
      }
      case AvroWriterPlan.UNION -> write(plan, in, plan.children[t][in.readIndex(plan.children[t].length)], depth, out);
      case AvroWriterPlan.ARRAY -> {
        nested(depth);
        out.append('[');
        boolean first = true;
        long count;
        while ((count = StrictAvroDecoder.blockCount(in)) != 0) {
          for (long i = 0; i < count; i++) {
            out.append(first ? "" : ",");
            first = false;
            write(plan, in, plan.size[t], depth + 1, out);
          }
        }
        out.append(']');
      }
      case AvroWriterPlan.MAP -> {
        nested(depth);
        Map<String, String> members = new LinkedHashMap<>();
        long count;
        while ((count = StrictAvroDecoder.blockCount(in)) != 0) {
          for (long i = 0; i < count; i++) {
            String key = StrictAvroDecoder.storable(in.readString()); // the record is declined either way
            StringBuilder value = new StringBuilder();
            write(plan, in, plan.size[t], depth + 1, value);
            members.put(key, value.toString());
          }
        }
        JsonText.object(members, out);
      }
      case AvroWriterPlan.RECORD -> {
        nested(depth);
        Map<String, String> members = new LinkedHashMap<>();
        int[] fields = plan.children[t];
        if (plan.symbols[t] == null) {
          throw new IllegalStateException("an Avro writer plan's record node " + t + " has no field names for JSON");
        }
        for (int i = 0; i < fields.length; i++) {
          StringBuilder value = new StringBuilder();
          write(plan, in, fields[i], depth + 1, value);
          members.put(plan.symbols[t][i], value.toString()); // an Avro name: letters, digits and _
        }
        JsonText.object(members, out);
      }
      default -> throw new IllegalStateException("no JSON text for Avro kind " + plan.kind[t]);
    }
  }

  private static void nested(int depth) {
    if (depth >= JsonText.MAX_DEPTH) {
      throw DECLINED; // json_values.jsonable refuses it: unstorable
    }
  }

  private static void text(String text, StringBuilder out) {
    JsonText.quote(StrictAvroDecoder.storable(text), out);
  }

  private static void base64(byte[] bytes, StringBuilder out) {
    out.append('"').append(Base64.getEncoder().encodeToString(bytes)).append('"');
  }
}
