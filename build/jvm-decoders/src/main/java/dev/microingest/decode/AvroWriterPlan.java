package dev.microingest.decode;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * How to read the values of one Avro writer schema, as microingest's `decode.jvm_avro.plan` writes it: {"types":
 * [node, ...], "declared": fields}. The root record is types[0]; a node is [kind] for null, boolean, int, long, float,
 * double, bytes and string; ["long" or "int", µs per unit] for a declared timestamp's logical type; ["fixed", size];
 * ["enum", [symbols]]; ["array", items]; ["map", values]; ["union", [branches]]; ["record", [field types]], each child
 * a node's index, so named types may refer to themselves; and for a declared field's logical type, ["date"] (an int of
 * days), ["decimal", [precision, scale]] (bytes), ["fixed-decimal", [size, precision, scale]] and, in a json field's
 * value, ["uuid"] (a string). The fields say, for
 * each field of the root record, the declared field it fills (its index), -1 for none, or, for a record on the way to
 * declared fields, the same list for that record's fields ({@link Fields}).
 */
final class AvroWriterPlan {
  static final byte NULL = 0;
  static final byte BOOLEAN = 1;
  static final byte INT = 2;
  static final byte LONG = 3;
  static final byte FLOAT = 4;
  static final byte DOUBLE = 5;
  static final byte BYTES = 6;
  static final byte STRING = 7;
  static final byte FIXED = 8;
  static final byte ENUM = 9;
  static final byte ARRAY = 10;
  static final byte MAP = 11;
  static final byte UNION = 12;
  static final byte RECORD = 13;
  static final byte DATE = 14;
  static final byte DECIMAL = 15;
  static final byte FIXED_DECIMAL = 16;
  static final byte UUID = 17;
  private static final List<String> KINDS =
      List.of(
          "null", "boolean", "int", "long", "float", "double", "bytes", "string", "fixed", "enum", "array", "map",
          "union", "record", "date", "decimal", "fixed-decimal", "uuid");
  private static final long MICROS_PER_MILLI = 1000;

  final byte[] kind;
  final int[] size; // a fixed's size; an array's items, a map's values; an int's or long's µs per unit (0: none)
  final int[][] children; // a union's branches, a record's field types
  final String[][] symbols; // an enum's; a record's field names, when a json field's value holds it
  final int[] precision; // a decimal's, with its scale
  final int[] scale;
  final Fields declared;

  /**
   * What a record's fields fill: {@code at[i]}, the declared field the record's field i is (-1: none); {@code
   * below[i]}, when field i is a record (or a record or null) on the way to declared fields, what its fields fill.
   */
  record Fields(int[] at, Fields[] below) {}

  private AvroWriterPlan(List<Object[]> nodes, Fields declared) {
    int n = nodes.size();
    kind = new byte[n];
    size = new int[n];
    children = new int[n][];
    symbols = new String[n][];
    precision = new int[n];
    scale = new int[n];
    for (int i = 0; i < n; i++) {
      Object[] node = nodes.get(i);
      kind[i] = (byte) (int) node[0];
      if (node[1] instanceof Integer v) {
        size[i] = v;
      } else if (node[1] instanceof int[] v && (kind[i] == DECIMAL || kind[i] == FIXED_DECIMAL)) {
        int at = kind[i] == FIXED_DECIMAL ? 1 : 0;
        if (v.length != at + 2) {
          throw new IllegalArgumentException("node " + i + " of an Avro writer plan is a decimal without its sizes");
        }
        size[i] = kind[i] == FIXED_DECIMAL ? v[0] : 0;
        precision[i] = v[at];
        scale[i] = v[at + 1];
      } else if (node[1] instanceof int[] v) {
        children[i] = v;
      } else if (node[1] instanceof String[] v) {
        symbols[i] = v;
      }
      if (node[2] instanceof String[] names) {
        symbols[i] = names; // a record's field names
      }
    }
    this.declared = declared;
  }

  static AvroWriterPlan parse(JsonParser p, String text) throws IOException {
    RecordSpec.expect(p.currentToken(), JsonToken.START_OBJECT, text);
    List<Object[]> nodes = null;
    Fields declared = null;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String key = p.currentName();
      p.nextToken();
      switch (key) {
        case "types" -> nodes = nodes(p, text);
        case "declared" -> declared = fields(p, text);
        default -> throw new IllegalArgumentException("unknown key '" + key + "' in an Avro writer plan: " + text);
      }
    }
    if (nodes == null || declared == null || nodes.isEmpty()) {
      throw new IllegalArgumentException("an Avro writer plan misses a key: " + text);
    }
    AvroWriterPlan plan = new AvroWriterPlan(nodes, declared);
    plan.checkStructure(text);
    return plan;
  }

  private static List<Object[]> nodes(JsonParser p, String text) throws IOException {
    RecordSpec.expect(p.currentToken(), JsonToken.START_ARRAY, text);
    List<Object[]> out = new ArrayList<>();
    while (p.nextToken() == JsonToken.START_ARRAY) {
      p.nextToken();
      int kind = KINDS.indexOf(p.getText());
      if (kind < 0) {
        throw new IllegalArgumentException("unknown Avro kind '" + p.getText() + "' in a writer plan: " + text);
      }
      Object arg = null;
      JsonToken next = p.nextToken();
      if (next == JsonToken.VALUE_NUMBER_INT) {
        arg = p.getIntValue();
        next = p.nextToken();
      } else if (next == JsonToken.START_ARRAY) {
        arg = kind == ENUM ? strings(p, text) : ints(p, text);
        next = p.nextToken();
      }
      String[] names = null;
      if (next == JsonToken.START_ARRAY && kind == RECORD) {
        names = strings(p, text); // a record in a json field's value: its fields' names
        next = p.nextToken();
      }
      RecordSpec.expect(next, JsonToken.END_ARRAY, text);
      out.add(new Object[] {kind, arg, names});
    }
    return out;
  }

  private static Fields fields(JsonParser p, String text) throws IOException {
    RecordSpec.expect(p.currentToken(), JsonToken.START_ARRAY, text);
    List<Integer> at = new ArrayList<>();
    List<Fields> below = new ArrayList<>();
    JsonToken token;
    while ((token = p.nextToken()) != JsonToken.END_ARRAY) {
      if (token == JsonToken.VALUE_NUMBER_INT) {
        at.add(p.getIntValue());
        below.add(null);
      } else {
        at.add(-1);
        below.add(fields(p, text));
      }
    }
    return new Fields(at.stream().mapToInt(Integer::intValue).toArray(), below.toArray(new Fields[0]));
  }

  private static int[] ints(JsonParser p, String text) throws IOException {
    RecordSpec.expect(p.currentToken(), JsonToken.START_ARRAY, text);
    List<Integer> out = new ArrayList<>();
    while (p.nextToken() == JsonToken.VALUE_NUMBER_INT) {
      out.add(p.getIntValue());
    }
    RecordSpec.expect(p.currentToken(), JsonToken.END_ARRAY, text);
    return out.stream().mapToInt(Integer::intValue).toArray();
  }

  private static String[] strings(JsonParser p, String text) throws IOException {
    List<String> out = new ArrayList<>();
    while (p.nextToken() == JsonToken.VALUE_STRING) {
      out.add(p.getText());
    }
    RecordSpec.expect(p.currentToken(), JsonToken.END_ARRAY, text);
    return out.toArray(new String[0]);
  }

  /** Every node has what its kind needs, every child is a node: the reader may then trust the plan. */
  private void checkStructure(String text) {
    int n = kind.length;
    for (int i = 0; i < n; i++) {
      boolean ok =
          switch (kind[i]) {
            case FIXED -> size[i] >= 0;
            case DECIMAL, FIXED_DECIMAL ->
                size[i] >= 0 && precision[i] >= 1 && scale[i] >= 0 && scale[i] <= precision[i];
            case INT, LONG -> size[i] == 0 || size[i] == 1 || size[i] == MICROS_PER_MILLI;
            case ARRAY, MAP -> size[i] >= 0 && size[i] < n;
            case UNION, RECORD ->
                children[i] != null
                    && Arrays.stream(children[i]).allMatch(c -> c >= 0 && c < n)
                    && (symbols[i] == null || symbols[i].length == children[i].length);
            case ENUM -> symbols[i] != null && symbols[i].length > 0;
            default -> true;
          };
      if (!ok) {
        throw new IllegalArgumentException("node " + i + " of an Avro writer plan is malformed: " + text);
      }
    }
    if (kind[0] != RECORD || children[0].length != declared.at.length) {
      throw new IllegalArgumentException("an Avro writer plan's root is not a record of its declared fields: " + text);
    }
  }

  /**
   * Each declared field's writer type is one the decoder takes as the declared type (alone or with null), named once;
   * each record on the way to declared fields is a record (alone or with null) of as many fields as the plan says.
   */
  void check(List<RecordSpec.Field> fields) {
    check(fields, 0, declared, new boolean[fields.size()]);
  }

  private void check(List<RecordSpec.Field> fields, int record, Fields mapped, boolean[] seen) {
    if (kind[record] != RECORD || children[record].length != mapped.at.length) {
      throw new IllegalArgumentException("an Avro writer plan's fields do not match its record node " + record);
    }
    for (int i = 0; i < mapped.at.length; i++) {
      int t = children[record][i];
      if (mapped.below[i] != null) {
        check(fields, nullable(t, "a nested record"), mapped.below[i], seen);
        continue;
      }
      int at = mapped.at[i];
      if (at < 0) {
        reachable(t, new boolean[kind.length], false); // skipped: no logical type's value, which fastavro may refuse
        continue;
      }
      if (at >= fields.size() || seen[at]) {
        throw new IllegalArgumentException("an Avro writer plan names declared field " + at + " twice or of none");
      }
      seen[at] = true;
      RecordSpec.Field field = fields.get(at);
      if (field.type() == RecordSpec.Type.JSON) {
        reachable(t, new boolean[kind.length], true);
        continue;
      }
      t = nullable(t, "field " + at);
      if (field.type() == RecordSpec.Type.ARRAY) {
        t = kind[t] == ARRAY ? nullable(size[t], "field " + at + "'s items") : -1;
      }
      if (t < 0 || !takes(field.kind(), t)) {
        throw new IllegalArgumentException(
            "an Avro writer plan gives field "
                + at
                + " ("
                + field.type()
                + ") a "
                + (t < 0 ? "non-array" : KINDS.get(kind[t])));
      }
    }
  }

  /**
   * Every node a skipped value ({@code asJson} false) or a json field's value ({@code asJson}) passes through is one
   * that reading knows: a skipped value holds no logical type's node (fastavro converts such values, and may refuse
   * them); a json field's value no timestamp's unit, and its records name their fields.
   */
  private void reachable(int t, boolean[] seen, boolean asJson) {
    if (seen[t]) {
      return;
    }
    seen[t] = true;
    byte k = kind[t];
    boolean unit = (k == INT || k == LONG) && size[t] != 0;
    boolean refused =
        asJson
            ? unit || (k == RECORD && symbols[t] == null)
            : k == DATE || k == DECIMAL || k == FIXED_DECIMAL || k == UUID || unit;
    if (refused) {
      String where = asJson ? "a json field's value" : "a skipped value";
      throw new IllegalArgumentException(
          "an Avro writer plan's node " + t + " (" + KINDS.get(k) + ") is in " + where + ", which cannot hold it");
    }
    switch (k) {
      case UNION, RECORD -> {
        for (int child : children[t]) {
          reachable(child, seen, asJson);
        }
      }
      case ARRAY, MAP -> reachable(size[t], seen, asJson);
      default -> {}
    }
  }

  /** The node a value of node {@code t} is when not null: {@code t} itself, or the other branch of [null, type]. */
  int nullable(int t, String what) {
    if (kind[t] != UNION) {
      return t;
    }
    int[] branches = children[t];
    if (branches.length != 2 || (kind[branches[0]] == NULL) == (kind[branches[1]] == NULL)) {
      throw new IllegalArgumentException("an Avro writer plan's union for " + what + " is not [null, type]");
    }
    return kind[branches[0]] == NULL ? branches[1] : branches[0];
  }

  private boolean takes(RecordSpec.Type type, int t) {
    byte k = kind[t];
    boolean number = k == INT || k == LONG;
    boolean unit = number && size[t] != 0;
    return switch (type) {
      case STRING -> k == STRING || k == ENUM;
      case INTEGER -> number && !unit;
      case DOUBLE -> k == FLOAT || k == DOUBLE;
      case BOOLEAN -> k == BOOLEAN;
      case TIMESTAMP -> number || k == STRING;
      case DECIMAL ->
          (number && !unit) || k == FLOAT || k == DOUBLE || k == STRING || k == DECIMAL || k == FIXED_DECIMAL;
      case DATE -> k == DATE || k == STRING;
      case UUID -> k == STRING;
      case BYTES -> k == BYTES || k == FIXED;
      case JSON, ARRAY -> false; // a json field takes any node (above); arrays hold items
    };
  }

  /** A declared timestamp's µs per unit of the writer's number: its logical type's, else epoch milliseconds. */
  long microsPerUnit(int t) {
    return size[t] == 0 ? MICROS_PER_MILLI : size[t];
  }
}
