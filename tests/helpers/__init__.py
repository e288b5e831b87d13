"""What the tests share: the platform's pipelines set up per test (`pipeline_env`), the exactly-once checks of
`make chaos` and the soak (`exactly_once`), Airflow over HTTP (`airflow_access`), a Chromium session
(`browser_session`), and the decoders' reference checks and hostile records (`reference_check`, `hostile_records`)."""
