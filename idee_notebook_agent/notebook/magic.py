"""``%idee_agent`` / ``%%idee_agent``: talk to the most recent MapChat from a cell.

``%load_ext idee_notebook_agent`` registers the magics. The answer streams into the cell output
(and appears in the chat panel too); options ``--provider``, ``--model`` (this turn only) and
``--new`` (start a new conversation). Interrupting the kernel (■) stops the turn cleanly.
"""

from __future__ import annotations

import json
import queue
import re
import sys
from dataclasses import dataclass
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class

from ..core.events import (
    DoneEvent,
    ErrorEvent,
    LayerEvent,
    SourcesEvent,
    TextDelta,
    ToolCallEvent,
    ToolResultEvent,
)

USAGE = (
    "Uso: %idee_agent [--provider NOMBRE] [--model MODELO] [--new] <petición>\n"
    "     %%idee_agent [--provider NOMBRE] [--model MODELO] [--new]  (la petición en la celda)"
)
_OPTION = re.compile(
    r"^\s*(--provider|--model)(?:=|\s+)(\"[^\"]*\"|'[^']*'|\S+)|^\s*(--new)(?=\s|$)"
)


@dataclass
class MagicArgs:
    provider: str | None = None
    model: str | None = None
    new: bool = False
    text: str = ""


def parse_magic(line: str, cell: str | None = None) -> MagicArgs:
    """Leading options, then the request (the rest of the line, or the cell body)."""
    args = MagicArgs()
    rest = line or ""
    while True:
        match = _OPTION.match(rest)
        if match is None:
            break
        if match.group(3):
            args.new = True
        else:
            value = match.group(2)
            if value[:1] in "\"'" and value[-1:] == value[:1]:
                value = value[1:-1]
            setattr(args, match.group(1)[2:], value)
        rest = rest[match.end() :]
    rest = rest.strip()
    if rest == "--" or rest.startswith("-- "):
        rest = rest[2:].strip()  # "--" ends the options: the request may start with a dash
    elif re.match(r"--?\w", rest):
        raise ValueError(f"Opción desconocida: {rest.split()[0]}.\n{USAGE}")
    if cell is not None:
        if rest:
            raise ValueError(
                f"En %%idee_agent la petición va en la celda, no en la línea.\n{USAGE}"
            )
        args.text = cell.strip()
    else:
        args.text = rest
    return args


def _target(create: bool = True) -> Any:
    from IPython.display import display

    from .mapchat import MapChat, current_mapchat

    chat = current_mapchat()
    if chat is None and create:
        chat = MapChat()
        display(chat)
    return chat


def run_magic(args: MagicArgs, out: Any = None) -> Any:
    """Send the request to the current MapChat and stream the answer to ``out`` (stdout)."""
    out = out or sys.stdout
    chat = _target()
    if args.new:
        chat.new_conversation()
    if not args.text:
        if not args.new:
            out.write(USAGE + "\n")
        return None
    events: queue.Queue[Any] = queue.Queue()
    turn = chat.submit(args.text, provider=args.provider, model=args.model, listener=events.put)
    try:
        _drain(turn, events, out)
    except KeyboardInterrupt:
        chat.stop(wait=10)
        out.write("\n⏹ Respuesta detenida (interrupción del kernel).\n")
    out.flush()
    return None


def _drain(turn: Any, events: queue.Queue[Any], out: Any) -> None:
    at_line_start = True
    while True:
        try:
            event = events.get(timeout=0.1)
        except queue.Empty:
            if turn.done and events.empty():
                break
            continue
        if isinstance(event, TextDelta):
            out.write(event.text)
            at_line_start = event.text.endswith("\n")
        else:
            line = _describe(event)
            if line:
                out.write(("" if at_line_start else "\n") + line + "\n")
                at_line_start = True
        out.flush()
        if isinstance(event, DoneEvent) and not event.pending:
            turn.wait(10)
    if turn.stopped:
        out.write("\n⏹ Respuesta detenida.\n")
    elif not at_line_start:
        out.write("\n")


def _describe(event: Any) -> str:
    if isinstance(event, ToolCallEvent):
        return "\n".join(
            f"🔧 {c.name}({_short(c.args)})" for c in event.calls if not event.awaiting_client
        )
    if isinstance(event, ToolResultEvent):
        mark = "✓" if event.success else "✗"
        return f"   {mark} {_short(event.result)}"
    if isinstance(event, LayerEvent):
        return f"🗺 capa «{event.layer.get('name', '')}» en el mapa"
    if isinstance(event, SourcesEvent):
        return "📚 Fuentes: " + ", ".join(str(s.get("source")) for s in event.sources)
    if isinstance(event, ErrorEvent):
        return f"⚠ {event.message}"
    return ""


def _short(value: Any, limit: int = 140) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@magics_class
class IdeeAgentMagics(Magics):
    """The ``%idee_agent`` line and cell magic."""

    @line_cell_magic
    def idee_agent(self, line: str, cell: str | None = None) -> None:
        """Ask the IDEE map agent.

        %idee_agent [--provider NOMBRE] [--model MODELO] [--new] <petición>
        %%idee_agent [--provider NOMBRE] [--model MODELO] [--new]   (petición en la celda)
        """
        try:
            args = parse_magic(line, cell)
        except ValueError as exc:
            print(exc, file=sys.stderr)
            return
        run_magic(args)


def keep_question_marks(lines: list[str]) -> list[str]:
    """Input transformer: ``%idee_agent ¿qué capas hay?`` reaches the agent, not IPython's help.

    IPython reads a line ending in ``?`` as a help request before any magic runs; a one-line
    ``%idee_agent`` cell is rewritten into the equivalent ``run_line_magic`` call first.
    """
    if len(lines) != 1:
        return lines
    line = lines[0]
    stripped = line.strip()
    if not stripped.startswith("%idee_agent ") or not stripped.endswith("?"):
        return lines
    argument = stripped[len("%idee_agent ") :]
    return [f"get_ipython().run_line_magic('idee_agent', {argument!r})\n"]


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(IdeeAgentMagics)
    cleanup = ipython.input_transformers_cleanup
    if keep_question_marks not in cleanup:
        cleanup.append(keep_question_marks)


def unload_ipython_extension(ipython: Any) -> None:
    cleanup = ipython.input_transformers_cleanup
    if keep_question_marks in cleanup:
        cleanup.remove(keep_question_marks)
    magics = ipython.magics_manager.magics
    magics["line"].pop("idee_agent", None)
    magics["cell"].pop("idee_agent", None)
    ipython.magics_manager.registry.pop("IdeeAgentMagics", None)


__all__ = ["IdeeAgentMagics", "load_ipython_extension", "parse_magic", "unload_ipython_extension"]
