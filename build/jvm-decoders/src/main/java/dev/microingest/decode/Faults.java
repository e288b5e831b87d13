package dev.microingest.decode;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The executor fault point of microingest's fault-injection tests (`microingest.faults`), on the JVM path: a job's
 * MICROINGEST_FAULT naming `executor_after_decode` travels in the decoding spec (or is the executor's own
 * environment's), and fires in each task once its first record is decoded. `pause:FILE` creates FILE (or finds it made
 * by another of the job's tasks) and waits (up to 120 s) until it is removed; any other action halts the executor's
 * JVM, as a lost machine would. MICROINGEST_FAULT_ONCE's file arms it for the first task only. Unset, as in
 * production, nothing happens.
 */
final class Faults {
  static final String POINT = "executor_after_decode";

  private Faults() {}

  static void fire(String fault, String once) {
    if (fault == null) {
      return;
    }
    String[] parts = fault.split(":", 3);
    if (!parts[0].equals(POINT)) {
      return;
    }
    try {
      if (once != null) {
        try {
          Files.createFile(Path.of(once));
        } catch (FileAlreadyExistsException e) {
          return;
        }
      }
      if (parts.length == 3 && parts[1].equals("pause")) {
        Path marker = Path.of(parts[2]);
        try {
          Files.createFile(marker);
        } catch (FileAlreadyExistsException e) {
          // Another of the job's tasks paused first; each waits on the one marker, as the Python fault point does.
        }
        long deadline = System.nanoTime() + 120_000_000_000L;
        while (Files.exists(marker) && System.nanoTime() < deadline) {
          Thread.sleep(200);
        }
        return;
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    }
    Runtime.getRuntime().halt(137);
  }
}
