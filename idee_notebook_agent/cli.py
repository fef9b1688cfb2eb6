"""``idee-agent``: ask the agent from the terminal, list what is loaded, and run the capabilities.

Each capability adds its own commands from ``<capability>/commands.py`` (a ``register(app)``
function), so this module stays small and its start-up light.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from importlib import import_module
from typing import Annotated, Any

import typer

from .errors import IdeeAgentError

app = typer.Typer(
    name="idee-agent",
    help="Asistente de mapas IDEE/IGN: chat con herramientas de mapa, servidor REST/SSE, conocimiento y detección.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

COMMAND_MODULES = (
    "idee_notebook_agent.server.commands",
    "idee_notebook_agent.knowledge.commands",
    "idee_notebook_agent.detection.commands",
    "idee_notebook_agent.mcp.commands",
)


def fail(message: str, code: int = 2) -> None:
    """One clear line on stderr instead of a traceback."""
    typer.secho(f"Error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


@app.callback()
def _main(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Mensajes de depuración.")
    ] = False,
) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


@app.command()
def ask(
    text: Annotated[str, typer.Argument(help='Petición, p. ej. "Llévame a Madrid".')],
    provider: Annotated[
        str | None, typer.Option(help="Proveedor (openai, gemini, offline o de providers.json).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Modelo del proveedor.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Un evento JSON por línea.")] = False,
) -> None:
    """Run one turn against an in-memory map and stream the answer and tool calls."""
    from .core.agent import Agent
    from .core.conversation import Conversation
    from .core.events import (
        ErrorEvent,
        LayerEvent,
        SourcesEvent,
        TextDelta,
        ToolCallEvent,
        ToolResultEvent,
    )
    from .core.headless_map import HeadlessMapPort

    try:
        agent = Agent(provider=provider, model=model)
        agent.providers.get_config(provider)
    except IdeeAgentError as exc:
        fail(str(exc))
    port = HeadlessMapPort()
    conversation = Conversation()

    async def run() -> int:
        status = 0
        async for event in agent.stream(conversation, text, map_port=port):
            if json_output:
                typer.echo(json.dumps(event.to_dict(), ensure_ascii=False, default=str))
                continue
            if isinstance(event, TextDelta):
                typer.echo(event.text, nl=False)
            elif isinstance(event, ToolCallEvent):
                for call in event.calls:
                    typer.secho(
                        f"\n→ {call.name}({json.dumps(call.args, ensure_ascii=False)})",
                        fg=typer.colors.CYAN,
                    )
            elif isinstance(event, ToolResultEvent):
                mark = "✓" if event.success else "✗"
                typer.secho(
                    f"  {mark} {_short(event.result)}",
                    fg=typer.colors.GREEN if event.success else typer.colors.YELLOW,
                )
            elif isinstance(event, SourcesEvent):
                names = ", ".join(str(s.get("source")) for s in event.sources)
                typer.secho(f"Fuentes: {names}", fg=typer.colors.BLUE)
            elif isinstance(event, LayerEvent):
                typer.secho(f"  ▣ capa {event.layer.get('name', '')}", fg=typer.colors.MAGENTA)
            elif isinstance(event, ErrorEvent):
                typer.secho(f"\n{event.message}", fg=typer.colors.RED, err=True)
                status = 1
        if not json_output:
            typer.echo("")
            state = port.state()
            typer.secho(
                f"Mapa: centro {state['center']['lat']:.5f}, {state['center']['lon']:.5f} · zoom {state['zoom']} · "
                f"capas: {', '.join(state['layers']) or '—'}",
                dim=True,
            )
        return status

    raise typer.Exit(asyncio.run(run()))


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@app.command("tools")
def list_tools(json_output: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the tools the model sees and where each runs (server or map)."""
    from .toolbox.registry import ToolRegistry

    try:
        registry = ToolRegistry.load()
    except IdeeAgentError as exc:
        fail(str(exc))
    if json_output:
        typer.echo(
            json.dumps([s.to_dict() for s in registry.tool_list()], ensure_ascii=False, indent=2)
        )
        return
    for spec in registry.tool_list():
        where = "servidor" if registry.is_server_tool(spec.name) else "mapa"
        typer.echo(f"{spec.name:<20} [{where}] {spec.description.splitlines()[0][:90]}")


@app.command("skills")
def list_skills() -> None:
    """List the loaded skills and their tools."""
    from .toolbox.registry import ToolRegistry

    try:
        registry = ToolRegistry.load()
    except IdeeAgentError as exc:
        fail(str(exc))
    for skill in registry.skills:
        typer.echo(f"{skill.name:<20} {skill.description}  ({', '.join(skill.tools)})")


@app.command("providers")
def list_providers(json_output: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the configured language model providers and their models (never keys)."""
    from .llm.registry import ProviderRegistry

    try:
        registry = ProviderRegistry.from_settings()
    except IdeeAgentError as exc:
        fail(str(exc))
    public = registry.public()
    if json_output:
        typer.echo(json.dumps(public, ensure_ascii=False, indent=2))
        return
    default = registry.default_name()
    for entry in public:
        mark = "*" if entry["name"].lower() == default.lower() else " "
        models = ", ".join(m["id"] for m in entry["models"])
        typer.echo(f"{mark} {entry['name']:<16} {models}")


def _register_capabilities() -> None:
    for module_name in COMMAND_MODULES:
        try:
            module = import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue
            raise
        module.register(app)


def main(argv: list[str] | None = None) -> None:
    _register_capabilities()
    try:
        app(args=argv if argv is not None else sys.argv[1:])
    except IdeeAgentError as exc:
        typer.secho(f"Error: {exc}", fg=typer.colors.RED, err=True)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
