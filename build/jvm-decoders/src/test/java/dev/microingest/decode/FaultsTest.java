package dev.microingest.decode;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The pause the fault-injection tests hold a job's tasks in, while they kill what serves it. */
class FaultsTest {
  @Test
  void tasksPausingTogetherShareOneMarkerAndAllResumeOnceItIsRemoved(@TempDir Path dir) throws Exception {
    Path marker = dir.resolve("decoding");
    String fault = Faults.POINT + ":pause:" + marker;
    int tasks = 8;
    CountDownLatch start = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(tasks);
    List<Future<?>> paused = new ArrayList<>();
    for (int i = 0; i < tasks; i++) {
      paused.add(
          pool.submit(
              () -> {
                start.await();
                Faults.fire(fault, null);
                return null;
              }));
    }
    start.countDown();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!Files.exists(marker) && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertTrue(Files.exists(marker), "no task paused");
    Thread.sleep(300); // every task has reached the marker by now, or has failed on it
    for (Future<?> task : paused) {
      assertTrue(!task.isDone() || task.get() == null, "a task failed instead of pausing");
    }
    Files.delete(marker);
    for (Future<?> task : paused) {
      assertEquals(null, task.get(10, TimeUnit.SECONDS)); // rethrows what a task threw
    }
    pool.shutdown();
  }

  @Test
  void aFaultForAnotherPointDoesNothing(@TempDir Path dir) {
    Path marker = dir.resolve("decoding");
    Faults.fire("driver_after_decode:pause:" + marker, null);
    Faults.fire(null, null);
    assertTrue(!Files.exists(marker));
  }
}
