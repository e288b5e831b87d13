package dev.microingest.decode;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.junit.jupiter.api.Test;

/** The forms taken and the reference's rules; tests/unit/decode/test_jvm_json.py compares thousands more with Python. */
class IsoTimestampTest {
  private static final long DAY = IsoTimestamp.MICROS_PER_DAY;
  // 2026-11-30T00:00:00Z
  private static final long MIDNIGHT = 20_787L * DAY;

  private static final long LOWEST = -62_135_596_800_000_000L;
  private static final long HIGHEST = 253_402_300_799_999_999L;

  private static Long micros(String text) {
    return IsoTimestamp.micros(text, LOWEST, HIGHEST);
  }

  @Test
  void theFormsProducersWrite() {
    assertEquals(MIDNIGHT, micros("2026-11-30T00:00:00"));
    assertEquals(MIDNIGHT, micros("2026-11-30 00:00:00Z"));
    assertEquals(MIDNIGHT + 1_500_000L, micros("2026-11-30T00:00:01,5Z"));
    assertEquals(MIDNIGHT - 5_400_000_000L, micros("2026-11-30T00:00:00+01:30"));
    assertEquals(MIDNIGHT + 3_600_000_000L, micros("2026-11-30T00:00:00-01:00"));
    assertEquals(MIDNIGHT - 5_400_000_000L, micros("2026-11-30T00:00:00+0130"));
    assertEquals(MIDNIGHT + 3_600_000_000L, micros("2026-11-30T00:00:00-01"));
  }

  @Test
  void moreThanSixFractionalDigitsRoundHalfToEvenOnTheDouble() {
    assertEquals(123_457L, IsoTimestamp.fractionMicros("1234567"));
    assertEquals(2L, IsoTimestamp.fractionMicros("0000025"));
    assertEquals(1_000_000L, IsoTimestamp.fractionMicros("999999999"));
    assertEquals(MIDNIGHT + 1_000_000L, micros("2026-11-30T00:00:00.9999999Z"));
  }

  @Test
  void theDaysMidnightAtItsOffsetAndTheInstantMustBothBeStorable() {
    assertEquals(LOWEST, micros("0001-01-01T00:00:00Z"));
    assertEquals(HIGHEST, micros("9999-12-31T23:59:59.999999Z"));
    assertNull(micros("0001-01-01T02:00:00+01:00"), "its midnight is before the year 1 in UTC");
    assertNull(micros("9999-12-31T23:00:00-01:00"), "the instant is after the year 9999 in UTC");
  }

  @Test
  void aLeapSecondAndTwentyFourHundredEndTheirMinuteAndDay() {
    assertEquals(MIDNIGHT + 60_000_000L, micros("2026-11-30T00:00:60Z"));
    assertEquals(MIDNIGHT + DAY, micros("2026-11-30T24:00:00Z"));
    assertEquals(MIDNIGHT + DAY, micros("2026-11-30T23:59:60Z"));
  }

  @Test
  void whatTheReferenceRefusesOrReadsOtherwiseIsDeclined() {
    for (String text :
        new String[] {
          "2026-11-30T24:00:01Z",
          "2026-11-30T23:59:60.5Z",
          "2026-11-30T23:59:61Z",
          "2026-11-30T00:60:00Z",
          "2026-02-29T00:00:00Z",
          "2026-13-01T00:00:00Z",
          "0000-01-01T00:00:00Z",
          "2026-11-30",
          "2026-11-30t00:00:00",
          "20261130T000000Z",
          "2026-11-30T00:00:00z",
          "2026-11-30T00:00:00+01:60",
          "2026-11-30T00:00:00+1",
          "2026-11-30T00:00:00+01:0",
          "2026-11-30T00:00:00+24:00",
          "2026-11-30T00:00:00.Z",
          "2026-11-30T00:00:00.1234567890Z",
          "2026-11-30T00:00:00Z ",
          "2026-11-30T\u0660\u0660:00:00Z",
        }) {
      assertNull(micros(text), text);
    }
  }
}
