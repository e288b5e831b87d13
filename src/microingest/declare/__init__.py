"""Declare: the pipeline declaration (YAML) and its validation, the names it may use."""
