package dev.microingest.decode;

import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.api.java.UDF2;

/**
 * Spark SQL's face of {@link HeldValue}: microingest_held_in_jvm(value, spec), where the spec (a literal of the query,
 * `decode.jvm_spec.held_spec`) names the declared field. Registered per session with
 * `spark.udf.registerJavaFunction` (`spark.sql_transform`); the value arrives as Spark converts the statement's
 * column for a Java function (a decimal as BigDecimal, an array as a Scala Seq).
 */
public final class HeldValueUdf implements UDF2<Object, String, String> {
  private static final long serialVersionUID = 1L;
  private static final ConcurrentHashMap<String, HeldValue> HELD = new ConcurrentHashMap<>();

  @Override
  public String call(Object value, String spec) {
    // Looked up on every call: a query holding two fields may call one instance of this function for both.
    return HELD.computeIfAbsent(spec, HeldValueUdf::checked).held(value);
  }

  private static HeldValue checked(String spec) {
    RecordDecoder.checkBuild(spec); // before the spec is parsed, as DecodeRecordUdf does
    return HeldValue.of(spec);
  }
}
