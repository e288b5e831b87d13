"""The pipelines folder: one YAML file per pipeline, named after it. Each file is read and validated on its own, so
a malformed one fails alone and the others are served.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from microingest import settings
from microingest.declare import registry_schema, validate
from microingest.declare.pipeline import DeclarationError, Pipeline


def load_pipeline_file(path: Path) -> Pipeline:
    """The pipeline a file declares; whatever goes wrong reading or validating it is a DeclarationError naming the
    file, so that callers serving many pipelines can set this one aside."""
    try:
        raw = _read_yaml(path)
        if registry_schema.from_registry(raw) is not None:
            raw = registry_schema.resolved(raw, str(path))
        pipeline = validate.parse_pipeline(raw, str(path))
    except DeclarationError:
        raise
    except Exception as exc:  # a gap in the validation above must still fail this file alone
        raise DeclarationError(str(path), "<file>", f"could not be loaded: {type(exc).__name__}: {exc}") from exc
    if path.stem != pipeline.name:
        raise DeclarationError(str(path), "name", f"must match the file name '{path.stem}', got '{pipeline.name}'")
    return pipeline


# libyaml's safe loader where PyYAML was built with it (eight times faster, the same values): the DAG file reads every
# declaration at each parse.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: Path) -> Any:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DeclarationError(str(path), "<file>", f"cannot be read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DeclarationError(
            str(path),
            "<file>",
            f"is not UTF-8 text: byte 0x{data[exc.start]:02x} on line {line}; save the file as UTF-8",
        ) from None
    try:
        return yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise DeclarationError(str(path), "<yaml>", f"not valid YAML: {exc}") from None


def load_pipelines(folder: Path | None = None) -> list[Pipeline]:
    """All declarations in the folder (default: settings.pipelines_dir()), sorted by name; the first malformed one
    raises DeclarationError."""
    pipelines, errors = load_declarations(folder)
    if errors:
        raise errors[0]
    return pipelines


def load_declarations(folder: Path | None = None) -> tuple[list[Pipeline], list[DeclarationError]]:
    """The valid declarations in the folder, and the errors of the malformed ones, each on its own: one broken
    file does not hide the others."""
    folder = folder or settings.pipelines_dir()
    pipelines: list[Pipeline] = []
    errors: list[DeclarationError] = []
    if not folder.is_dir():  # an installed package has no pipelines/ of its own: say where to set one
        problem = (
            f"is not a folder; set {settings.PIPELINES_ENV} or [microingest] pipelines_dir in Airflow's configuration"
        )
        return pipelines, [DeclarationError(str(folder), "<folder>", problem)]
    files: dict[str, str] = {}
    for path in sorted(folder.glob("*.y*ml")):
        try:
            pipeline = load_pipeline_file(path)
        except DeclarationError as exc:
            errors.append(exc)
            continue
        if pipeline.name in files:  # x.yaml and x.yml: two DAGs of one id, and get_pipeline reads only x.yaml
            errors.append(
                DeclarationError(
                    str(path),
                    "name",
                    f"pipeline '{pipeline.name}' is also declared in {files[pipeline.name]}; keep one of the two files",
                )
            )
            continue
        files[pipeline.name] = path.name
        pipelines.append(pipeline)
    return pipelines, errors


def get_pipeline(name: str, folder: Path | None = None) -> Pipeline:
    folder = folder or settings.pipelines_dir()
    for suffix in (".yaml", ".yml"):
        path = folder / f"{name}{suffix}"
        if path.exists():
            return load_pipeline_file(path)
    raise DeclarationError(str(folder), "name", f"no declaration for pipeline '{name}'")
