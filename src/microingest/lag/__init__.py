"""Consumer lag: how far each pipeline is behind its topic, whether it keeps up, and the Airflow pieces that act on it.

- figures:      offset lag and time lag per partition (the ledger against Kafka)
- states:       OK / WARN / STALL / STOP / ERR from a window of observations (pure rules)
- observations: the recorded (position, log end) history those rules and the lag page read
The ledger in Postgres stays the only authority on positions; everything here reads it.
"""
