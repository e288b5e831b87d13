-- Airflow's metadata database lives in the same server as the pipelines' data (docker-compose setup).
CREATE DATABASE airflow;
