package dev.microingest.decode;

import java.time.DateTimeException;
import java.time.LocalDate;

/**
 * An ISO-8601 calendar date, {@code YYYY-MM-DD}, as the reference reads one (converters._date; the date part of
 * timestamps.from_iso): a day that exists, in the years 1 to 9999. Anything else is declined to the reference, which
 * says why.
 */
final class IsoDate {
  static final int LENGTH = 10;

  private IsoDate() {}

  /** The whole text as a date, or null to decline. */
  static LocalDate parse(String text) {
    return text.length() == LENGTH ? at(text, 0) : null;
  }

  /** The date written at {@code start} (the text may go on after it), or null. */
  static LocalDate at(String text, int start) {
    if (text.length() < start + LENGTH || text.charAt(start + 4) != '-' || text.charAt(start + 7) != '-') {
      return null;
    }
    int year = Ascii.digits(text, start, start + 4);
    int month = Ascii.digits(text, start + 5, start + 7);
    int day = Ascii.digits(text, start + 8, start + 10);
    if (year < 1 || month < 0 || day < 0) {
      return null;
    }
    try {
      return LocalDate.of(year, month, day);
    } catch (DateTimeException e) {
      return null; // no such day: the reference says so
    }
  }
}
