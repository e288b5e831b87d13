package dev.microingest.decode;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * How to read the values of one Avro writer schema, as microingest's `decode.jvm_avro.plan` writes it: {"types":
 * [node, ...], "declared": [declared field index or -1, per field of the root record]}. The root record is types[0];
 * a node is [kind] for null, boolean, int, long, float, double, bytes and string; ["long" or "int", µs per unit] for a
 * declared timestamp's logical type; ["fixed", size]; ["enum", [symbols]]; ["array", items]; ["map", values]; ["union",
 * [branches]]; ["record", [field types]], each child a node's index, so named types may refer to themselves.
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
  private static final List<String> KINDS =
      List.of(
          "null", "boolean", "int", "long", "float", "double", "bytes", "string", "fixed", "enum", "array", "map",
          "union", "record");
  private static final long MICROS_PER_MILLI = 1000;

  final byte[] kind;
  final int[] size; // a fixed's size; an array's items, a map's values; an int's or long's µs per unit (0: none)
  final int[][] children; // a union's branches, a record's field types
  final String[][] symbols; // an enum's
  final int[] declared;

  private AvroWriterPlan(List<Object[]> nodes, int[] declared) {
    int n = nodes.size();
    kind = new byte[n];
    size = new int[n];
    children = new int[n][];
    symbols = new String[n][];
    for (int i = 0; i < n; i++) {
      Object[] node = nodes.get(i);
      kind[i] = (byte) (int) node[0];
      if (node[1] instanceof Integer v) {
        size[i] = v;
      } else if (node[1] instanceof int[] v) {
        children[i] = v;
      } else if (node[1] instanceof String[] v) {
        symbols[i] = v;
      }
    }
    this.declared = declared;
  }

  static AvroWriterPlan parse(JsonParser p, String text) throws IOException {
    RecordSpec.expect(p.currentToken(), JsonToken.START_OBJECT, text);
    List<Object[]> nodes = null;
    int[] declared = null;
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String key = p.currentName();
      p.nextToken();
      switch (key) {
        case "types" -> nodes = nodes(p, text);
        case "declared" -> declared = ints(p, text);
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
        arg = kind == ENUM ? strings(p) : ints(p, text);
        next = p.nextToken();
      }
      RecordSpec.expect(next, JsonToken.END_ARRAY, text);
      out.add(new Object[] {kind, arg});
    }
    return out;
  }

  private static int[] ints(JsonParser p, String text) throws IOException {
    RecordSpec.expect(p.currentToken(), JsonToken.START_ARRAY, text);
    List<Integer> out = new ArrayList<>();
    while (p.nextToken() == JsonToken.VALUE_NUMBER_INT) {
      out.add(p.getIntValue());
    }
    return out.stream().mapToInt(Integer::intValue).toArray();
  }

  private static String[] strings(JsonParser p) throws IOException {
    List<String> out = new ArrayList<>();
    while (p.nextToken() == JsonToken.VALUE_STRING) {
      out.add(p.getText());
    }
    return out.toArray(new String[0]);
  }

  /** Every node has what its kind needs, every child is a node: the reader may then trust the plan. */
  private void checkStructure(String text) {
    int n = kind.length;
    for (int i = 0; i < n; i++) {
      boolean ok =
          switch (kind[i]) {
            case FIXED -> size[i] >= 0;
            case INT, LONG -> size[i] == 0 || size[i] == 1 || size[i] == MICROS_PER_MILLI;
            case ARRAY, MAP -> size[i] >= 0 && size[i] < n;
            case UNION, RECORD ->
                children[i] != null && Arrays.stream(children[i]).allMatch(c -> c >= 0 && c < n);
            case ENUM -> symbols[i] != null && symbols[i].length > 0;
            default -> true;
          };
      if (!ok) {
        throw new IllegalArgumentException("node " + i + " of an Avro writer plan is malformed: " + text);
      }
    }
    if (kind[0] != RECORD || children[0].length != declared.length) {
      throw new IllegalArgumentException("an Avro writer plan's root is not a record of its declared fields: " + text);
    }
  }

  /** Each declared field's writer type is one the decoder takes as the declared type (alone or with null). */
  void check(List<RecordSpec.Field> fields) {
    boolean[] seen = new boolean[fields.size()];
    for (int i = 0; i < declared.length; i++) {
      int at = declared[i];
      if (at < 0) {
        continue;
      }
      if (at >= fields.size() || seen[at]) {
        throw new IllegalArgumentException("an Avro writer plan names declared field " + at + " twice or of none");
      }
      seen[at] = true;
      int t = children[0][i];
      if (kind[t] == UNION) {
        int[] branches = children[t];
        if (branches.length != 2 || (kind[branches[0]] == NULL) == (kind[branches[1]] == NULL)) {
          throw new IllegalArgumentException("an Avro writer plan's union for field " + at + " is not [null, type]");
        }
        t = kind[branches[0]] == NULL ? branches[1] : branches[0];
      }
      if (!takes(fields.get(at).type(), t)) {
        throw new IllegalArgumentException(
            "an Avro writer plan gives field " + at + " (" + fields.get(at).type() + ") a " + KINDS.get(kind[t]));
      }
    }
  }

  private boolean takes(RecordSpec.Type type, int t) {
    byte k = kind[t];
    boolean unit = (k == INT || k == LONG) && size[t] != 0;
    return switch (type) {
      case STRING -> k == STRING || k == ENUM;
      case INTEGER -> (k == INT || k == LONG) && !unit;
      case DOUBLE -> k == FLOAT || k == DOUBLE;
      case BOOLEAN -> k == BOOLEAN;
      case TIMESTAMP -> k == INT || k == LONG;
      case DECIMAL, DATE, UUID, BYTES, JSON, ARRAY -> false; // not read from Avro: such pipelines' go to the reference
    };
  }

  /** A declared timestamp's µs per unit of the writer's number: its logical type's, else epoch milliseconds. */
  long microsPerUnit(int t) {
    return size[t] == 0 ? MICROS_PER_MILLI : size[t];
  }
}
