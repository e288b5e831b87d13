package dev.microingest.decode;

import static dev.microingest.decode.AvroInput.DECLINED;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.List;

/**
 * Avro values in the Confluent wire format (magic byte 0, a 4-byte schema id, the datum), read by the plan of their
 * writer schema the spec carries ({@link AvroWriterPlan}, `decode.jvm_avro`). A record is declined when its schema id
 * has no plan (the driver made none: a schema the reference must judge, or one registered since the job began), when
 * its bytes break any rule of {@link AvroInput}, when the datum ends before or after the value does, when nesting goes
 * past 500, and when a declared field's value is one the reference refuses: NUL in a string, a double that is not
 * finite, a timestamp outside the years 1 to 9999, a required field null or absent from the writer schema, a decimal,
 * date or UUID the declared type refuses.
 *
 * <p>A declared field takes its writer's value as the reference's converters do (fastavro's Python value, then
 * `converters`): a string or an enum's symbol; an int or long; a float (widened exactly) or double; a boolean; a
 * timestamp from epoch milliseconds, the microseconds or milliseconds of a (local-)timestamp logical type, or ISO-8601
 * text ({@link IsoTimestamp}); a decimal from its logical type's unscaled bytes, an int or long, a float's or double's
 * exact binary value, or decimal text ({@link ExactDecimal}), fitted to the declared scale; a date from its logical
 * type's days or ISO text; a UUID from its text (with or without the uuid logical type); bytes from bytes or a fixed;
 * an array's items each so, nulls kept. Declared fields may lie in records nested in the value (alone or with null);
 * key and header fields are taken from the record as for JSON ({@link RecordDecoder}).
 */
public final class StrictAvroDecoder extends RecordDecoder {
  private static final int HEADER_BYTES = 5;
  private static final int MAX_DEPTH = 500;

  private final RecordSpec.Field[] fields;

  StrictAvroDecoder(RecordSpec spec) {
    super(spec);
    this.fields = spec.fields.toArray(new RecordSpec.Field[0]);
  }

  @Override
  public Object[] decode(byte[] key, byte[] value, String headers) {
    Object[] out = started(key, value);
    if (out == null || value.length < HEADER_BYTES || value[0] != 0) {
      return null;
    }
    int id = ((value[1] & 0xFF) << 24) | ((value[2] & 0xFF) << 16) | ((value[3] & 0xFF) << 8) | (value[4] & 0xFF);
    AvroWriterPlan plan = spec.writers.get(id);
    if (plan == null) {
      return null;
    }
    AvroInput in = new AvroInput(value, HEADER_BYTES);
    try {
      readRecord(plan, in, 0, plan.declared, out);
    } catch (RuntimeException e) {
      if (e != DECLINED) {
        throw e;
      }
      return null;
    }
    return in.atEnd() && fromRecord(out, key, headers) ? finished(out) : null;
  }

  /** The fields of record node {@code record} into the declared fields {@code mapped} names. */
  private void readRecord(AvroWriterPlan plan, AvroInput in, int record, AvroWriterPlan.Fields mapped, Object[] out) {
    int[] fieldTypes = plan.children[record];
    for (int i = 0; i < fieldTypes.length; i++) {
      int t = fieldTypes[i];
      if (mapped.below()[i] != null) {
        t = present(plan, in, t);
        if (t >= 0) {
          readRecord(plan, in, t, mapped.below()[i], out); // null: the fields below it stay null, as the reference's
        }
      } else if (mapped.at()[i] < 0) {
        skip(plan, in, t, 0);
      } else {
        int at = mapped.at()[i];
        t = present(plan, in, t);
        RecordSpec.Field field = fields[at];
        if (t >= 0) {
          out[at + 1] =
              field.type() == RecordSpec.Type.ARRAY ? array(plan, in, t, field) : read(plan, in, t, field.type(), field);
        }
      }
    }
  }

  /** The node of the value that follows: {@code t}, or the branch its union index names; -1 for a null. */
  private static int present(AvroWriterPlan plan, AvroInput in, int t) {
    if (plan.kind[t] == AvroWriterPlan.UNION) {
      t = plan.children[t][in.readIndex(plan.children[t].length)];
    }
    return plan.kind[t] == AvroWriterPlan.NULL ? -1 : t;
  }

  private List<Object> array(AvroWriterPlan plan, AvroInput in, int t, RecordSpec.Field field) {
    List<Object> items = new ArrayList<>();
    long count;
    while ((count = blockCount(in)) != 0) {
      for (long i = 0; i < count; i++) {
        int item = present(plan, in, plan.size[t]);
        items.add(item < 0 ? null : read(plan, in, item, field.items(), field));
      }
    }
    return items;
  }

  private Object read(AvroWriterPlan plan, AvroInput in, int t, RecordSpec.Type type, RecordSpec.Field field) {
    byte kind = plan.kind[t];
    switch (type) {
      case STRING -> {
        String text =
            kind == AvroWriterPlan.ENUM ? plan.symbols[t][in.readIndex(plan.symbols[t].length)] : in.readString();
        return storable(text);
      }
      case INTEGER -> {
        return kind == AvroWriterPlan.INT ? in.readInt() : in.readLong();
      }
      case DOUBLE -> {
        return finite(kind == AvroWriterPlan.FLOAT ? (double) in.readFloat() : in.readDouble());
      }
      case BOOLEAN -> {
        return in.readBoolean();
      }
      case TIMESTAMP -> {
        if (kind == AvroWriterPlan.STRING) {
          return taken(IsoTimestamp.micros(in.readString(), spec.lowestMicros, spec.highestMicros));
        }
        long n = kind == AvroWriterPlan.INT ? in.readInt() : in.readLong();
        return micros(n, plan.microsPerUnit(t));
      }
      case DECIMAL -> {
        return taken(ExactDecimal.fit(exactDecimal(plan, in, t), field.precision(), field.scale(), field.halfEven()));
      }
      case DATE -> {
        return taken(kind == AvroWriterPlan.DATE ? epochDay(in.readInt()) : IsoDate.parse(in.readString()));
      }
      case UUID -> {
        return taken(UuidText.bytes(in.readString()));
      }
      case BYTES -> {
        int n = kind == AvroWriterPlan.FIXED ? plan.size[t] : in.readLength();
        return in.readBytes(n);
      }
      case JSON -> {
        return AvroJsonText.read(plan, in, t);
      }
      default -> throw new IllegalStateException("no reading for " + type);
    }
  }

  /**
   * A decimal's exact value as fastavro and the reference's `converters._decimal` take it; declined where fastavro
   * rounds it (an unscaled value of more digits than the writer's precision) or the reference refuses it.
   */
  static BigDecimal exactDecimal(AvroWriterPlan plan, AvroInput in, int t) {
    switch (plan.kind[t]) {
      case AvroWriterPlan.DECIMAL, AvroWriterPlan.FIXED_DECIMAL -> {
        int n = plan.kind[t] == AvroWriterPlan.FIXED_DECIMAL ? plan.size[t] : in.readLength();
        byte[] unscaled = in.readBytes(n);
        BigInteger digits = n == 0 ? BigInteger.ZERO : new BigInteger(unscaled); // fastavro's int.from_bytes(b"") is 0
        BigDecimal exact = new BigDecimal(digits, plan.scale[t]);
        if (exact.precision() > plan.precision[t]) {
          throw DECLINED; // fastavro rounds it to the writer's precision
        }
        return exact;
      }
      case AvroWriterPlan.INT -> {
        return BigDecimal.valueOf(in.readInt());
      }
      case AvroWriterPlan.LONG -> {
        return BigDecimal.valueOf(in.readLong());
      }
      case AvroWriterPlan.FLOAT, AvroWriterPlan.DOUBLE -> {
        double d = plan.kind[t] == AvroWriterPlan.FLOAT ? (double) in.readFloat() : in.readDouble();
        return new BigDecimal(finite(d)); // the double's own value, exactly, as Decimal(float)
      }
      default -> {
        return taken(ExactDecimal.text(in.readString()));
      }
    }
  }

  /** The day, when fastavro's date.fromordinal gives one (the years 1 to 9999). */
  static LocalDate epochDay(long days) {
    LocalDate day = LocalDate.ofEpochDay(days);
    return day.getYear() >= 1 && day.getYear() <= 9999 ? day : null;
  }

  /** The text, unless the reference refuses it ({@link RecordDecoder#storableText}). */
  static String storable(String text) {
    return taken(RecordDecoder.storableText(text));
  }

  static double finite(double d) {
    if (!Double.isFinite(d)) {
      throw DECLINED;
    }
    return d;
  }

  /** The value, unless the reference refuses it (null). */
  static <T> T taken(T value) {
    if (value == null) {
      throw DECLINED;
    }
    return value;
  }

  static long blockCount(AvroInput in) {
    long count = in.readLong();
    if (count < 0) {
      if (count == Long.MIN_VALUE) {
        throw DECLINED;
      }
      count = -count;
      in.readLong(); // the block's size in bytes, which fastavro does not use either
    }
    if (count > in.remaining()) {
      throw DECLINED; // every item takes a byte at least (the plan has no array of empty items)
    }
    return count;
  }

  /** The instant's microseconds, when it lies in the years 1 to 9999 (fastavro and the reference refuse others). */
  private long micros(long n, long perUnit) {
    if (perUnit == 1) {
      if (n < spec.lowestMicros || n > spec.highestMicros) {
        throw DECLINED;
      }
      return n;
    }
    if (n < spec.lowestMillis || n > spec.highestMillis) {
      throw DECLINED;
    }
    return n * perUnit;
  }

  private static void skip(AvroWriterPlan plan, AvroInput in, int t, int depth) {
    if (depth > MAX_DEPTH) {
      throw DECLINED; // fastavro's recursion would give out somewhere near here
    }
    switch (plan.kind[t]) {
      case AvroWriterPlan.NULL -> {}
      case AvroWriterPlan.BOOLEAN -> in.readBoolean();
      case AvroWriterPlan.INT -> in.readInt();
      case AvroWriterPlan.LONG -> in.readLong();
      case AvroWriterPlan.FLOAT -> in.skip(4);
      case AvroWriterPlan.DOUBLE -> in.skip(8);
      case AvroWriterPlan.BYTES -> in.skip(in.readLength());
      case AvroWriterPlan.STRING -> in.skipString();
      case AvroWriterPlan.FIXED -> in.skip(plan.size[t]);
      case AvroWriterPlan.ENUM -> in.readIndex(plan.symbols[t].length);
      case AvroWriterPlan.UNION -> skip(plan, in, plan.children[t][in.readIndex(plan.children[t].length)], depth + 1);
      case AvroWriterPlan.RECORD -> {
        for (int field : plan.children[t]) {
          skip(plan, in, field, depth + 1);
        }
      }
      case AvroWriterPlan.ARRAY, AvroWriterPlan.MAP -> {
        boolean map = plan.kind[t] == AvroWriterPlan.MAP;
        long count;
        while ((count = blockCount(in)) != 0) {
          for (long i = 0; i < count; i++) {
            if (map) {
              in.skipString();
            }
            skip(plan, in, plan.size[t], depth + 1);
          }
        }
      }
      default -> throw new IllegalStateException("no skipping Avro kind " + plan.kind[t]); // the plan's check refused it
    }
  }
}
