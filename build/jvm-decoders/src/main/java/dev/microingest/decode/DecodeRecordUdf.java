package dev.microingest.decode;

import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF3;

/**
 * Spark SQL's face of {@link RecordDecoder}: microingest_decode_...(key, value, spec) is a struct of the staged key and
 * the declared fields, or NULL when the record is declined (the reference decodes it). Registered per session with
 * `spark.udf.registerJavaFunction`, its return type written from the same declaration (`decode.jvm_spec`).
 */
public final class DecodeRecordUdf implements UDF3<byte[], byte[], String, Row> {
  private static final long serialVersionUID = 1L;
  // One decoder per spec and JVM: the spec is a constant of the query, parsed once.
  private static final ConcurrentHashMap<String, RecordDecoder> DECODERS = new ConcurrentHashMap<>();

  // This instance serves one task: Spark deserializes the function for each.
  private transient boolean started;

  @Override
  public Row call(byte[] key, byte[] value, String spec) {
    RecordDecoder decoder = DECODERS.computeIfAbsent(spec, RecordDecoder::of);
    if (!started) {
      decoder.checkBuild();
    }
    Object[] decoded = decoder.decode(key, value);
    if (!started) {
      started = true;
      decoder.fault();
    }
    return decoded == null ? null : RowFactory.create(decoded);
  }
}
