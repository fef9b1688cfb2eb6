"""``idee-agent models list|download``: see and install the detector model files."""

from __future__ import annotations

import json
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add the ``models`` command group to the ``idee-agent`` app."""
    models_app = typer.Typer(
        help="Modelos de los detectores (p. ej. piscinas): listar y descargar.",
        no_args_is_help=True,
    )

    @models_app.command("list")
    def list_models(json_output: Annotated[bool, typer.Option("--json")] = False) -> None:
        """Known models, where they go and whether they are installed."""
        from .models import model_status

        rows = model_status()
        if json_output:
            typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
            return
        for row in rows:
            state = "instalado" if row["installed"] else "no instalado (se usa OpenCV)"
            typer.echo(f"{row['name']:<8} {state:<30} {row['path']}")
            typer.echo(f"         URL: {row['url'] or '— (define IDEE_POOL_MODEL_URL)'}")

    @models_app.command("download")
    def download(
        name: Annotated[str, typer.Argument(help="Modelo a descargar.")] = "pools",
        url: Annotated[str | None, typer.Option(help="URL del fichero ONNX.")] = None,
        sha256: Annotated[str | None, typer.Option(help="Suma sha256 esperada.")] = None,
        force: Annotated[bool, typer.Option("--force", help="Descargar aunque exista.")] = False,
    ) -> None:
        """Download a model from its configured URL and verify its sha256."""
        from ..errors import IdeeAgentError
        from .base import clear_instances
        from .models import download_model

        state = {"last": -1}

        def show(done: int, total: int | None) -> None:
            mb = done // (1 << 20)
            if mb != state["last"]:
                state["last"] = mb
                of = f" de {total / (1 << 20):.1f}" if total else ""
                typer.echo(f"\r  {mb} MB{of}", nl=False, err=True)

        try:
            path = download_model(name, url=url, sha256=sha256, force=force, progress=show)
        except IdeeAgentError as exc:
            typer.echo("", err=True)
            typer.secho(f"Error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None
        typer.echo("", err=True)
        clear_instances()
        problem = _check_model(path)
        if problem:
            typer.secho(f"Aviso: {problem}", fg=typer.colors.YELLOW, err=True)
        typer.secho(f"Modelo '{name}' instalado en {path}", fg=typer.colors.GREEN)

    app.add_typer(models_app, name="models")


def _check_model(path) -> str | None:
    """Whether onnxruntime can load the file as a YOLO detect graph (a message if not)."""
    try:
        from .yolo import YoloOnnx

        YoloOnnx(path)
    except Exception as exc:
        return f"el fichero no se puede usar como detector YOLO: {exc}"
    return None
