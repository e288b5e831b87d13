package dev.microingest.decode;

import java.time.LocalDate;

/**
 * ISO-8601 text as the reference reads it (timestamps.from_iso), for the forms producers write: {@code
 * YYYY-MM-DD}, {@code T} or a space, {@code HH:MM:SS}, an optional fraction after {@code .} or {@code ,} of up to nine
 * digits, and {@code Z}, an offset ({@code ±HH:MM}, {@code ±HHMM}, {@code ±HH}) or nothing (UTC). Anything else,
 * including every text the reference refuses, is declined to the reference, which says why or reads the rarer forms
 * Python's {@code fromisoformat} has.
 *
 * <p>The reference's own rules, kept here: up to six fractional digits are exact; more are rounded as Postgres rounds
 * them ({@code rint(fraction * 1e6)} on the double: nine digits read correctly rounded, as Python's {@code float()});
 * {@code :60} is the next minute's first instant; {@code 24:00:00} the next day's midnight, and no time of day passes
 * it. Two instants must be storable, as the reference checks them: the day's midnight at the given offset, then the
 * instant itself.
 */
final class IsoTimestamp {
  static final long MICROS_PER_SECOND = 1_000_000L;
  static final long MICROS_PER_DAY = 86_400L * MICROS_PER_SECOND;
  private static final int MAX_FRACTION_DIGITS = 9;

  private IsoTimestamp() {}

  /** Microseconds since the epoch, or null to decline; {@code lowest} and {@code highest}: the storable ones. */
  static Long micros(String text, long lowest, long highest) {
    int n = text.length();
    if (n < 19 || text.charAt(13) != ':' || text.charAt(16) != ':') {
      return null;
    }
    char sep = text.charAt(10);
    if (sep != 'T' && sep != ' ') {
      return null;
    }
    int hours = Ascii.digits(text, 11, 13);
    int minutes = Ascii.digits(text, 14, 16);
    int seconds = Ascii.digits(text, 17, 19);
    if (hours < 0 || minutes < 0 || seconds < 0) {
      return null;
    }
    int at = 19;
    long fraction = 0;
    if (at < n && (text.charAt(at) == '.' || text.charAt(at) == ',')) {
      int start = ++at;
      while (at < n && Ascii.isDigit(text.charAt(at))) {
        at++;
      }
      int count = at - start;
      if (count == 0 || count > MAX_FRACTION_DIGITS) {
        return null;
      }
      fraction = fractionMicros(text.substring(start, at));
    }
    Integer offsetSeconds = offsetSeconds(text, at);
    if (offsetSeconds == null) {
      return null;
    }
    if (hours > 24 || minutes > 59 || seconds > 60 || (hours == 24 && (minutes != 0 || seconds != 0 || fraction != 0))) {
      return null;
    }
    long intoDay = ((hours * 60L + minutes) * 60L + seconds) * MICROS_PER_SECOND + fraction;
    if (intoDay > MICROS_PER_DAY) {
      return null;
    }
    LocalDate date = IsoDate.at(text, 0);
    if (date == null) {
      return null;
    }
    long epochDay = date.toEpochDay();
    long midnight = (epochDay * 86_400L - offsetSeconds) * MICROS_PER_SECOND;
    long instant = midnight + intoDay;
    return midnight >= lowest && midnight <= highest && instant <= highest ? instant : null;
  }

  /** The fraction's digits as microseconds: six or fewer exactly, more rounded half to even on the double. */
  static long fractionMicros(String digits) {
    if (digits.length() <= 6) {
      long micros = Long.parseLong(digits);
      for (int i = digits.length(); i < 6; i++) {
        micros *= 10;
      }
      return micros;
    }
    return (long) Math.rint(Double.parseDouble("0." + digits) * MICROS_PER_SECOND);
  }

  /** The offset east of UTC that ends the text at {@code at}: nothing or Z is UTC; else ±HH[[:]MM], under a day. */
  private static Integer offsetSeconds(String text, int at) {
    int rest = text.length() - at;
    if (rest == 0 || (rest == 1 && text.charAt(at) == 'Z')) {
      return 0;
    }
    char sign = text.charAt(at);
    if (sign != '+' && sign != '-') {
      return null;
    }
    int hours = rest >= 3 ? Ascii.digits(text, at + 1, at + 3) : -1;
    int minutes;
    if (rest == 3) {
      minutes = 0;
    } else if (rest == 5) {
      minutes = Ascii.digits(text, at + 3, at + 5);
    } else if (rest == 6 && text.charAt(at + 3) == ':') {
      minutes = Ascii.digits(text, at + 4, at + 6);
    } else {
      return null;
    }
    if (hours < 0 || minutes < 0 || hours > 23 || minutes > 59) {
      return null;
    }
    int seconds = hours * 3600 + minutes * 60;
    return sign == '-' ? -seconds : seconds;
  }
}
