"""Telling the world what landed: the Asset event of committed batches, the DAG run's note, lineage and metrics.

Everything here reads what the commit stage recorded (the batch history, the lag observations); nothing here takes
part in a commit, so a failure to announce or to count never touches the data.
"""
