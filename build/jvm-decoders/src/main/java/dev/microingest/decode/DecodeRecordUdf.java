package dev.microingest.decode;

import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF4;

/**
 * Spark SQL's face of {@link RecordDecoder}: microingest_decode_...(key, value, headers, spec) is a struct of the staged key and
 * the declared fields, or NULL when the record is declined (the reference decodes it). Registered per session with
 * `spark.udf.registerJavaFunction`, its return type written from the same declaration (`decode.jvm_spec`).
 */
public final class DecodeRecordUdf implements UDF4<byte[], byte[], String, String, Row> {
  private static final long serialVersionUID = 1L;
  // One decoder per spec and JVM: the spec is a constant of the query, parsed once.
  private static final ConcurrentHashMap<String, RecordDecoder> DECODERS = new ConcurrentHashMap<>();

  // This instance serves one task (Spark deserializes the function for each), whose every row passes the same spec,
  // a literal of the query: it is looked up once. Spark hands each row a new copy of the text, whose hash a lookup
  // per row would compute again (kilobytes for an Avro pipeline's plans).
  private transient RecordDecoder decoder;

  @Override
  public Row call(byte[] key, byte[] value, String headers, String spec) {
    boolean first = decoder == null;
    if (first) {
      RecordDecoder.checkBuild(spec); // before the spec is parsed: another build may write specs this one cannot read
      decoder = DECODERS.computeIfAbsent(spec, RecordDecoder::of);
    }
    Object[] decoded = decoder.decode(key, value, headers);
    if (first) {
      decoder.fault();
    }
    return decoded == null ? null : RowFactory.create(decoded);
  }
}
