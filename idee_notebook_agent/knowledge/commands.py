"""CLI of the knowledge base: ``idee-agent index``, ``idee-agent sources`` (list, ``rm``,
``search``). Registered by ``cli.py`` through ``register(app)``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ..errors import IdeeAgentError


def guess_type(source: str) -> str:
    """git for repository URLs (``.git``, ``git@``) and local repositories, web for other
    http(s) URLs, path for local folders."""
    lower = source.lower()
    if lower.startswith("git@") or lower.endswith(".git") or lower.startswith("file://"):
        return "git"
    if lower.startswith(("http://", "https://")):
        return "web"
    return "git" if (Path(source).expanduser() / ".git").exists() else "path"


def _fail(message: str) -> None:
    from ..cli import fail

    fail(message)


def register(app: typer.Typer) -> None:
    """Add the knowledge commands to the ``idee-agent`` app."""

    @app.command("index")
    def index_command(
        source: Annotated[
            str, typer.Argument(help="URL o ruta del repositorio git, URL del sitio o carpeta.")
        ],
        source_type: Annotated[
            str | None,
            typer.Option("--type", "-t", help="git, web o path (por defecto se deduce)."),
        ] = None,
        name: Annotated[
            str | None, typer.Option("--name", "-n", help="Nombre de la fuente (se deduce).")
        ] = None,
        batch_size: Annotated[
            int, typer.Option("--batch-size", help="Fragmentos por lote de embeddings.")
        ] = 100,
        max_pages: Annotated[
            int, typer.Option("--max-pages", help="Páginas como máximo (solo --type web).")
        ] = 50,
        quiet: Annotated[
            bool, typer.Option("--quiet", "-q", help="Sin barras de progreso.")
        ] = False,
    ) -> None:
        """Index a git repository, a documentation site or a folder (re-indexing replaces it)."""
        from ..config import get_settings
        from .indexers import index_source

        kind = (source_type or guess_type(source)).lower()
        try:
            report = index_source(
                source,
                kind,
                name=name,
                settings=get_settings(),
                batch_size=batch_size,
                max_pages=max_pages,
                progress=not quiet,
            )
        except IdeeAgentError as exc:
            _fail(str(exc))
            return
        for warning in report.warnings:
            typer.secho(f"Aviso: {warning}", fg=typer.colors.YELLOW, err=True)
        for url, reason in list(report.skipped.items())[:20]:
            typer.secho(f"Omitida {url}: {reason}", dim=True, err=True)
        model = report.model or "solo BM25 (sin modelo de embeddings)"
        typer.secho(
            f"Fuente '{report.name}' indexada: {report.documents} documentos, "
            f"{report.chunks} fragmentos, modelo {model}, {report.seconds:.1f} s.",
            fg=typer.colors.GREEN,
        )

    sources_app = typer.Typer(
        help="Fuentes de conocimiento indexadas: listar, borrar, buscar.",
        invoke_without_command=True,
        no_args_is_help=False,
    )

    @sources_app.callback()
    def sources_main(
        ctx: typer.Context,
        json_output: Annotated[bool, typer.Option("--json", help="Salida JSON.")] = False,
    ) -> None:
        """List the indexed sources with their chunk counts, model and date."""
        if ctx.invoked_subcommand is not None:
            return
        from ..config import get_settings
        from .store import KnowledgeStore

        try:
            sources = KnowledgeStore(get_settings().data_dir).sources()
        except IdeeAgentError as exc:
            _fail(str(exc))
            return
        if json_output:
            typer.echo(json.dumps(list(sources.values()), ensure_ascii=False, indent=2))
            return
        if not sources:
            typer.echo("No hay fuentes indexadas. Añade una con: idee-agent index SOURCE --type …")
            return
        for name in sorted(sources):
            entry = sources[name]
            model = entry.get("embedding_model") or "solo BM25"
            typer.echo(
                f"{name:<24} {entry.get('type', '?'):<5} {entry.get('chunks', 0):>7} frag.  "
                f"{model}  {entry.get('created_at', '')}  {entry.get('location', '')}"
            )

    @sources_app.command("rm")
    def remove_command(name: Annotated[str, typer.Argument(help="Nombre de la fuente.")]) -> None:
        """Remove an indexed source."""
        from ..config import get_settings
        from .store import KnowledgeStore

        try:
            entry = KnowledgeStore(get_settings().data_dir).remove(name)
        except IdeeAgentError as exc:
            _fail(str(exc))
            return
        typer.echo(f"Fuente '{name}' eliminada ({entry.get('chunks', 0)} fragmentos).")

    @sources_app.command("search")
    def search_command(
        query: Annotated[str, typer.Argument(help="Pregunta o palabras clave.")],
        k: Annotated[int, typer.Option("--k", "-k", help="Resultados.")] = 5,
        mode: Annotated[str, typer.Option(help="hybrid, dense o bm25.")] = "hybrid",
        json_output: Annotated[bool, typer.Option("--json", help="Salida JSON.")] = False,
    ) -> None:
        """Search the indexed sources as the agent does (to check what it will find)."""
        from ..config import get_settings
        from .retriever import KnowledgeRetriever

        try:
            hits = KnowledgeRetriever(get_settings()).search(query, k, mode)
        except IdeeAgentError as exc:
            _fail(str(exc))
            return
        if json_output:
            typer.echo(json.dumps(hits, ensure_ascii=False, indent=2))
            return
        if not hits:
            typer.echo("Sin resultados.")
        for hit in hits:
            lines = (
                f":{hit.get('line_start')}-{hit.get('line_end')}" if hit.get("line_start") else ""
            )
            typer.secho(
                f"{hit['score']:.4f}  {hit['source']}{lines}  [{hit.get('source_name')}] "
                f"{hit.get('title', '')}",
                fg=typer.colors.CYAN,
            )
            typer.echo("    " + " ".join(hit["content"].split())[:200])

    app.add_typer(sources_app, name="sources")
