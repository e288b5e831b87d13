"""The command line, the demo, and the Airflow REST client they use."""
