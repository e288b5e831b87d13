package dev.microingest.decode;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.time.LocalDate;
import java.util.HexFormat;
import org.junit.jupiter.api.Test;

/** Dates and UUIDs as the reference reads their text (converters._date, converters._uuid). */
class TextValuesTest {
  @Test
  void datesThatExistInTheYearsOneTo9999() {
    assertEquals(LocalDate.of(2024, 2, 29), IsoDate.parse("2024-02-29"));
    assertEquals(LocalDate.of(1, 1, 1), IsoDate.parse("0001-01-01"));
    for (String refused : new String[] {"2023-02-29", "0000-01-01", "2024-13-01", "2024-1-01", "2024-01-01T00", ""}) {
      assertNull(IsoDate.parse(refused), refused);
    }
  }

  @Test
  void uuidsWithAllTheirHyphensOrNone() {
    byte[] bytes = HexFormat.of().parseHex("123e4567e89b12d3a456426614174000");
    assertArrayEquals(bytes, UuidText.bytes("123e4567-e89b-12d3-a456-426614174000"));
    assertArrayEquals(bytes, UuidText.bytes("123E4567E89B12D3A456426614174000"));
    for (String refused :
        new String[] {"123e4567-e89b12d3-a456-426614174000", "123e4567e89b12d3a45642661417400g", "{123e4567}", ""}) {
      assertNull(UuidText.bytes(refused), refused);
    }
  }
}
