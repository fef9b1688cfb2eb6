"""``idee-agent serve`` and ``idee-agent cleanup`` (registered by ``cli.py``; imports stay lazy)."""

from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        host: Annotated[str, typer.Option(help="Interfaz de escucha.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Puerto.")] = 8000,
        workers: Annotated[
            int, typer.Option(min=1, help="Procesos de uvicorn (comparten la base de datos).")
        ] = 1,
        log_level: Annotated[str, typer.Option(help="debug, info, warning...")] = "info",
        access_log: Annotated[
            bool,
            typer.Option(
                "--access-log/--no-access-log",
                help="Una línea por petición (desactívalo con mucha carga).",
            ),
        ] = True,
    ) -> None:
        """Serve the REST/SSE API for the API-IDEE chat plugin (/api, /api/v2) and a demo at /."""
        try:
            import uvicorn

            from .app import create_app  # noqa: F401  (fail here, clearly, if an extra is missing)
        except ImportError as exc:
            typer.secho(
                f"Error: falta una dependencia del servidor ({exc.name}). Instala: "
                'pip install "idee-notebook-agent[server]"',
                fg=typer.colors.RED,
                err=True,
            )
            raise typer.Exit(2) from None
        typer.secho(f"Servidor en http://{host}:{port}/  (API: /api, docs: /api/docs)", err=True)
        uvicorn.run(
            "idee_notebook_agent.server.app:create_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level=log_level,
            access_log=access_log,
        )

    @app.command("cleanup")
    def cleanup(
        hours: Annotated[
            float | None,
            typer.Option(help="Antigüedad en horas (por defecto CONVERSATION_TTL_HOURS)."),
        ] = None,
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="Solo listar lo que se borraría.")
        ] = False,
    ) -> None:
        """Delete conversations idle for longer than the TTL (never one with a turn in progress)."""
        from ..config import get_settings
        from .store import Store, iso

        settings = get_settings()
        ttl = settings.conversation_ttl_hours if hours is None else hours
        if ttl < 0:
            typer.secho("Error: --hours no puede ser negativo.", fg=typer.colors.RED, err=True)
            raise typer.Exit(2)
        store = Store.from_settings(settings)
        try:
            victims = store.cleanup(ttl, dry_run=dry_run)
        finally:
            store.close()
        verb = "Se borrarían" if dry_run else "Borradas"
        typer.echo(
            f"{verb} {len(victims)} conversaciones sin actividad desde hace más de {ttl:g} h."
        )
        for record in victims:
            typer.echo(f"  {record.id}  {iso(record.updated_at)}  {record.title[:60]}")


__all__ = ["register"]
