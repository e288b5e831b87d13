package dev.microingest.decode;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.List;

/**
 * The decoders without Spark, for the differential tests (tests/unit/decode/test_jvm_json.py,
 * tests/integration/decode/test_jvm_avro.py): `java -cp ... dev.microingest.decode.DecodeLines SPEC` reads lines of
 * "key-hex value-hex [headers-hex]" ("-" for null; the headers as Spark's to_json writes them) and writes one JSON line per record: null when declined, else [key, values...]
 * with each double as its 64 bits in hex, so the comparison is bit for bit, a decimal as its plain text (every digit of
 * its scale), a date as YYYY-MM-DD and bytes in hex.
 */
public final class DecodeLines {
  private DecodeLines() {}

  public static void main(String[] args) throws IOException {
    RecordDecoder decoder = RecordDecoder.of(args[0]);
    HexFormat hex = HexFormat.of();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
    BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
    try (JsonGenerator json = new JsonFactory().createGenerator(out)) {
      json.setRootValueSeparator(null);
      String line;
      while ((line = in.readLine()) != null) {
        String[] parts = line.split(" ", -1);
        Object[] decoded =
            decoder.decode(
                parts[0].equals("-") ? null : hex.parseHex(parts[0]),
                parts[1].equals("-") ? null : hex.parseHex(parts[1]),
                parts.length < 3 || parts[2].equals("-")
                    ? null
                    : new String(hex.parseHex(parts[2]), StandardCharsets.UTF_8));
        if (decoded == null) {
          json.writeNull();
        } else {
          json.writeStartArray();
          for (Object v : decoded) {
            write(json, hex, v);
          }
          json.writeEndArray();
        }
        json.writeRaw('\n');
      }
    }
  }

  private static void write(JsonGenerator json, HexFormat hex, Object v) throws IOException {
    if (v == null) {
      json.writeNull();
    } else if (v instanceof Double d) {
      json.writeString(Long.toHexString(Double.doubleToRawLongBits(d)));
    } else if (v instanceof Long l) {
      json.writeNumber(l);
    } else if (v instanceof Boolean b) {
      json.writeBoolean(b);
    } else if (v instanceof BigDecimal d) {
      json.writeString(d.toPlainString());
    } else if (v instanceof List<?> items) {
      json.writeStartArray();
      for (Object item : items) {
        write(json, hex, item);
      }
      json.writeEndArray();
    } else if (v instanceof byte[] b) {
      json.writeString(hex.formatHex(b));
    } else {
      json.writeString(v.toString()); // text, or a LocalDate as YYYY-MM-DD
    }
  }
}
