"""Consumer lag: how far each pipeline is behind its topic and whether it keeps up (the Airflow sensors, triggers and
the lag page that act on it are in microingest.airflow).

- figures:      offset lag and time lag per partition (the ledger against Kafka)
- states:       OK / WARN / STALL / STOP / ERR from a window of observations (pure rules)
- observations: the recorded (position, log end) history those rules and the lag page read
- status:       one pipeline's figures, state and last batches together; text: the same for the terminal
- policy:       the declaration's `lag:` section (gate and SLA thresholds)
- checks:       gate and SLA checks on a status (airflow.lag_triggers defers on them)
- mirror:       ledger positions copied to a Kafka consumer group for Kafka's own tools
The ledger in Postgres stays the only authority on positions; everything here reads it.
"""
