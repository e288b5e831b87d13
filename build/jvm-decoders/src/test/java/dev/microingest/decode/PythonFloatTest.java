package dev.microingest.decode;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/**
 * Python's own repr() of each value, written down from CPython 3.11; tests/integration/decode/test_jvm_avro.py holds
 * the JVM's to Python's on random doubles of every exponent.
 */
class PythonFloatTest {
  @Test
  void reprIsPythons() {
    Object[][] cases = {
      {0.1, "0.1"},
      {1.0, "1.0"},
      {-0.0, "-0.0"},
      {1234.5, "1234.5"},
      {1e15, "1000000000000000.0"},
      {1e16, "1e+16"},
      {0.0001, "0.0001"},
      {0.00001, "1e-05"},
      {1.5e-7, "1.5e-07"},
      {123456789012345680.0, "1.2345678901234568e+17"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {5e-324, "5e-324"},
      {(double) 0.1f, "0.10000000149011612"},
      {2.0 / 3, "0.6666666666666666"},
      {9007199254740993.0, "9007199254740992.0"},
      {-2.5e-5, "-2.5e-05"},
      {Math.pow(2, -1074) * 3, "1.5e-323"},
    };
    for (Object[] c : cases) {
      assertEquals(c[1], PythonFloat.repr((double) c[0]), String.valueOf(c[0]));
    }
  }
}
