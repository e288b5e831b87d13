package dev.microingest.decode;

import static dev.microingest.decode.AvroInput.DECLINED;

import java.util.List;

/**
 * Avro values in the Confluent wire format (magic byte 0, a 4-byte schema id, the datum), read by the plan of their
 * writer schema the spec carries ({@link AvroWriterPlan}, `decode.jvm_avro`). A record is declined when its schema id
 * has no plan (the driver made none: a schema the reference must judge, or one registered since the job began), when
 * its bytes break any rule of {@link AvroInput}, when the datum ends before or after the value does, when nesting goes
 * past 500, and when a declared field's value is one the reference refuses: NUL in a string, a double that is not
 * finite, a timestamp outside the years 1 to 9999, a required field null or absent from the writer schema.
 *
 * <p>A declared field takes its writer's value as it is: a string or an enum's symbol; an int or long; a float
 * (widened exactly) or double; a boolean; a timestamp from epoch milliseconds, or from the microseconds or
 * milliseconds of a (local-)timestamp logical type. The plan holds no other case.
 */
public final class StrictAvroDecoder extends RecordDecoder {
  private static final int HEADER_BYTES = 5;
  private static final int MAX_DEPTH = 500;

  private final RecordSpec.Type[] types;

  StrictAvroDecoder(RecordSpec spec) {
    super(spec);
    for (RecordSpec.Field field : spec.fields) {
      if (field.source() != RecordSpec.Source.VALUE
          || !field.path().equals(List.of(field.name()))
          || field.type() == RecordSpec.Type.ARRAY) {
        throw new IllegalArgumentException(
            "field '" + field.name() + "' is not one the Avro decoder reads, in decoding spec");
      }
    }
    this.types = spec.fields.stream().map(RecordSpec.Field::type).toArray(RecordSpec.Type[]::new);
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
      int[] fieldTypes = plan.children[0];
      for (int i = 0; i < fieldTypes.length; i++) {
        int at = plan.declared[i];
        if (at < 0) {
          skip(plan, in, fieldTypes[i], 0);
        } else {
          out[at + 1] = read(plan, in, fieldTypes[i], types[at]);
        }
      }
    } catch (RuntimeException e) {
      if (e != DECLINED) {
        throw e;
      }
      return null;
    }
    return in.atEnd() ? finished(out) : null;
  }

  private Object read(AvroWriterPlan plan, AvroInput in, int t, RecordSpec.Type type) {
    if (plan.kind[t] == AvroWriterPlan.UNION) {
      t = plan.children[t][in.readIndex(2)];
      if (plan.kind[t] == AvroWriterPlan.NULL) {
        return null;
      }
    }
    byte kind = plan.kind[t];
    switch (type) {
      case STRING -> {
        String text =
            kind == AvroWriterPlan.ENUM ? plan.symbols[t][in.readIndex(plan.symbols[t].length)] : in.readString();
        if (text.indexOf('\0') >= 0) {
          throw DECLINED; // valid UTF-8 holds no lone surrogate; NUL is the one thing Postgres text refuses
        }
        return text;
      }
      case INTEGER -> {
        return kind == AvroWriterPlan.INT ? in.readInt() : in.readLong();
      }
      case DOUBLE -> {
        double d = kind == AvroWriterPlan.FLOAT ? (double) in.readFloat() : in.readDouble();
        if (!Double.isFinite(d)) {
          throw DECLINED;
        }
        return d;
      }
      case BOOLEAN -> {
        return in.readBoolean();
      }
      case TIMESTAMP -> {
        long n = kind == AvroWriterPlan.INT ? in.readInt() : in.readLong();
        return micros(n, plan.microsPerUnit(t));
      }
      default -> throw new IllegalStateException("no reading for " + type);
    }
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
        while ((count = in.readLong()) != 0) {
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
          for (long i = 0; i < count; i++) {
            if (map) {
              in.skipString();
            }
            skip(plan, in, plan.size[t], depth + 1);
          }
        }
      }
      default -> throw new IllegalStateException("unknown Avro kind " + plan.kind[t]);
    }
  }
}
