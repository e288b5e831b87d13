package dev.microingest.decode;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.util.Base64;

/**
 * A record's headers as the batch's frame carries them (Spark's to_json of the Kafka source's headers:
 * [{"key": name, "value": base64}], no "value" for a null one), read as the reference reads them
 * (staged_rows.kafka_headers, record_fields): for each wanted name, the last header of that name's value, or null.
 */
final class RecordHeaders {
  private static final JsonFactory FACTORY = new JsonFactory();

  private RecordHeaders() {}

  /** Per wanted name, the last header's value or null; null altogether when the text is not what Spark writes. */
  static byte[][] lastValues(String json, String[] names) {
    byte[][] out = new byte[names.length][];
    if (json == null) {
      return out; // the frame's headers are null when the record has none
    }
    try (JsonParser p = FACTORY.createParser(json)) {
      if (p.nextToken() != JsonToken.START_ARRAY) {
        return null;
      }
      while (p.nextToken() == JsonToken.START_OBJECT) {
        String key = null;
        byte[] value = null;
        while (p.nextToken() == JsonToken.FIELD_NAME) {
          String field = p.currentName();
          JsonToken kind = p.nextToken();
          if (field.equals("key") && kind == JsonToken.VALUE_STRING) {
            key = p.getText();
          } else if (field.equals("value") && kind == JsonToken.VALUE_STRING) {
            value = Base64.getDecoder().decode(p.getText());
          } else if (!(field.equals("value") && kind == JsonToken.VALUE_NULL)) {
            return null;
          }
        }
        if (key == null) {
          return null;
        }
        for (int i = 0; i < names.length; i++) {
          if (names[i].equals(key)) {
            out[i] = value;
          }
        }
      }
      return p.currentToken() == JsonToken.END_ARRAY && p.nextToken() == null ? out : null;
    } catch (IOException | IllegalArgumentException e) {
      return null;
    }
  }
}
