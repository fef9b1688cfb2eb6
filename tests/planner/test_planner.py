"""Behaviour of the offline planner as a provider: tool results, questions, errors, languages."""

from __future__ import annotations

import pytest

from idee_notebook_agent.core.conversation import (
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from idee_notebook_agent.llm.base import ChatProvider, ChatRequest, TextChunk, ToolCallChunk
from idee_notebook_agent.llm.offline import NO_MODEL_MESSAGE, OfflinePlanner
from tests.fakes.planner_world import BASE, World, all_specs, drive
from tests.planner.cases import load_cases

CANDIDATES = [
    {"id": "PNOA_WMTS", "title": "Ortofotos máxima actualidad PNOA", "type": "WMTS"},
    {"id": "PNOA_MA_TMS", "title": "PNOA-MA", "type": "TMS"},
]


@pytest.fixture(scope="module")
def planner() -> OfflinePlanner:
    return OfflinePlanner()


def specs_without(*names: str) -> list:
    return [s for s in all_specs() if s.name not in names]


def test_is_a_chat_provider_named_offline(planner: OfflinePlanner) -> None:
    assert isinstance(planner, ChatProvider)
    assert planner.name == "offline"


async def test_only_offered_tools_are_ever_called(planner: OfflinePlanner) -> None:
    offered = specs_without("geocodePlace", "detectObjects", "searchIdeeService", "listDetectors")
    names = {s.name for s in offered}
    for case in load_cases("phrasings.yaml"):
        turn = await drive(planner, case["text"], World.from_case(case.get("world")), specs=offered)
        assert {c.name for c in turn.calls} <= names, case["text"]
        assert turn.text.strip(), case["text"]


async def test_without_a_geocoder_it_says_so_and_calls_nothing(planner: OfflinePlanner) -> None:
    turn = await drive(planner, "llévame a Toledo", World(), specs=specs_without("geocodePlace"))
    assert turn.calls == []
    assert "geocodePlace" in turn.text and "no está disponible" in turn.text


async def test_goes_to_the_best_candidate_of_the_geocoder(planner: OfflinePlanner) -> None:
    turn = await drive(planner, "llévame a Toledo", World())
    assert [c.name for c in turn.calls] == ["geocodePlace", "zoomTo"]
    assert turn.calls[1].args == {"lat": 40.5, "lon": -3.25, "zoom": 12}
    assert "Toledo" in turn.text and "12" in turn.text


async def test_ambiguous_layer_asks_which_one_listing_the_candidates(
    planner: OfflinePlanner,
) -> None:
    turn = await drive(planner, "carga la capa PNOA", World(add_candidates=CANDIDATES))
    assert [c.name for c in turn.calls] == ["addLayer"]
    assert "¿Cuál quieres?" in turn.text
    assert "1. Ortofotos máxima actualidad PNOA" in turn.text and "2. PNOA-MA" in turn.text


@pytest.mark.parametrize(
    ("answer", "chosen"),
    [
        ("la segunda", "PNOA_MA_TMS"),
        ("2", "PNOA_MA_TMS"),
        ("la primera", "PNOA_WMTS"),
        ("PNOA-MA", "PNOA_MA_TMS"),
        ("the last one", "PNOA_MA_TMS"),
    ],
)
async def test_answer_to_the_question_adds_the_chosen_layer(
    planner: OfflinePlanner, answer: str, chosen: str
) -> None:
    world = World(add_candidates=CANDIDATES)
    first = await drive(planner, "carga la capa PNOA", world)
    second = await drive(planner, answer, world, history=first.messages)
    assert [(c.name, c.args) for c in second.calls] == [("addLayer", {"name": chosen})]
    assert chosen in [layer["name"] for layer in world.layers]


async def test_a_new_request_after_a_question_is_planned_normally(planner: OfflinePlanner) -> None:
    world = World(add_candidates=CANDIDATES)
    first = await drive(planner, "carga la capa PNOA", world)
    second = await drive(planner, "llévame a Toledo", world, history=first.messages)
    assert [c.name for c in second.calls] == ["geocodePlace", "zoomTo"]


async def test_a_service_found_by_search_can_be_loaded_by_number(planner: OfflinePlanner) -> None:
    world = World()
    first = await drive(planner, "busca servicios de hidrografía", world)
    assert "1. Servicio de hidrografía (WMS): https://example.test/wms" in first.text
    second = await drive(planner, "carga el 1", world, history=first.messages)
    assert [(c.name, c.args) for c in second.calls] == [
        (
            "addLayer",
            {
                "type": "WMS",
                "url": "https://example.test/wms",
                "legend": "Servicio de hidrografía",
                "name": "HY.PhysicalWaters.Waterbodies",
            },
        )
    ]


async def test_service_without_known_layers_lists_them_first(planner: OfflinePlanner) -> None:
    world = World(services=[{"title": "Geología", "type": "WMS", "url": "https://g.test/wms"}])
    first = await drive(planner, "busca servicios de geología", world)
    second = await drive(planner, "el primero", world, history=first.messages)
    assert [c.name for c in second.calls] == ["searchIdeeService", "addLayer"]
    assert second.calls[0].args == {"url": "https://g.test/wms"}
    assert second.calls[1].args["name"] == "capa1"


async def test_answers_in_english_when_asked_in_english(planner: OfflinePlanner) -> None:
    turn = await drive(planner, "take me to Madrid", World())
    assert turn.text.startswith("I moved the map to Madrid")
    spanish = await drive(planner, "llévame a Madrid", World())
    assert spanish.text.startswith("Te he llevado a Madrid")


async def test_tool_errors_are_reported_honestly(planner: OfflinePlanner) -> None:
    turn = await drive(planner, "llévame a Atlantis", World(geo_fail=True))
    assert "No he encontrado «Atlantis»" in turn.text
    assert "Sin resultados en CartoCiudad." in turn.text
    world = World(detect_error="El área es demasiado grande: acerca el zoom.")
    turn = await drive(planner, "detecta las piscinas de la vista", world)
    assert "No pude detectar piscinas" in turn.text and "acerca el zoom" in turn.text


async def test_detection_summary_gives_count_method_and_layer(planner: OfflinePlanner) -> None:
    turn = await drive(planner, "Detecta las piscinas de la vista", World())
    assert (
        "3 piscinas" in turn.text and "opencv" in turn.text and "Piscinas detectadas" in turn.text
    )


async def test_unknown_request_says_what_it_can_do_and_how_to_configure(
    planner: OfflinePlanner,
) -> None:
    turn = await drive(planner, "escribe un poema sobre Madrid", World())
    assert turn.calls == []
    for needle in (
        "escribe un poema",
        "llévame a Toledo",
        "OPENAI_API_KEY",
        "GOOGLE_API_KEY",
        "IDEE_PROVIDERS_FILE",
        "ajustes",
    ):
        assert needle in turn.text
    english = await drive(planner, "what's the weather like?", World())
    assert "settings" in english.text and "OPENAI_API_KEY" in english.text


async def test_base_map_is_kept_unless_asked_explicitly(planner: OfflinePlanner) -> None:
    turn = await drive(planner, "quita la capa IGNBaseTodo", World())
    assert [c.name for c in turn.calls] == ["listActiveLayers"]
    assert "mapa base" in turn.text
    world = World()
    turn = await drive(planner, "quita el mapa base", world)
    assert turn.calls[-1].args == {"name": "IGNBaseTodo", "force": True}
    assert world.layers == []


async def test_removing_an_unknown_layer_lists_what_is_loaded(planner: OfflinePlanner) -> None:
    world = World(layers=[dict(BASE), {"name": "Catastro", "type": "WMS", "legend": "Catastro"}])
    turn = await drive(planner, "quita la capa de carreteras", world)
    assert [c.name for c in turn.calls] == ["listActiveLayers"]
    assert "No encuentro ninguna capa «carreteras»" in turn.text and "Catastro" in turn.text


async def test_zoom_stops_at_the_limits(planner: OfflinePlanner) -> None:
    turn = await drive(planner, "acércate", World(zoom=22))
    assert [c.name for c in turn.calls] == ["getCurrentZoom"]
    assert "22" in turn.text
    turn = await drive(planner, "pon el zoom a 40", World())
    assert turn.calls == [] and "entre 0 y 22" in turn.text


async def test_independent_final_calls_share_a_round(planner: OfflinePlanner) -> None:
    turn = await drive(planner, "llévame a Sevilla y carga la ortofoto", World())
    assert [c.name for c in turn.calls] == ["geocodePlace", "zoomTo", "addLayer"]
    assert turn.rounds == 3  # geocode | zoomTo + addLayer | final text
    long = "llévame a Soria, acércate un poco, pon la ortofoto y detecta las piscinas"
    turn = await drive(planner, long, World())
    assert len(turn.calls) == 7
    assert turn.rounds <= 8  # within the agent's default IDEE_MAX_TOOL_ROUNDS


async def test_same_request_same_plan(planner: OfflinePlanner) -> None:
    request = ChatRequest(system="", messages=[UserMessage("llévame a Toledo")], tools=all_specs())
    first = [c.call.name async for c in planner.stream(request) if isinstance(c, ToolCallChunk)]
    second = [c.call.name async for c in planner.stream(request) if isinstance(c, ToolCallChunk)]
    assert first == second == ["geocodePlace"]


async def test_results_it_did_not_plan_end_the_turn(planner: OfflinePlanner) -> None:
    call = ToolCall("fetchWebPage", {"url": "https://example.test"})
    messages = [
        UserMessage("llévame a Toledo"),
        AssistantMessage("", [call]),
        ToolResultMessage(call.id, call.name, {"success": True, "text": "..."}),
    ]
    chunks = [c async for c in planner.stream(ChatRequest("", messages, all_specs()))]
    assert not any(isinstance(c, ToolCallChunk) for c in chunks)
    assert "no coinciden" in "".join(c.text for c in chunks if isinstance(c, TextChunk))


async def test_without_a_user_message_it_introduces_itself(planner: OfflinePlanner) -> None:
    chunks = [c async for c in planner.stream(ChatRequest("", [], all_specs()))]
    assert [c.text for c in chunks if isinstance(c, TextChunk)] == [NO_MODEL_MESSAGE]


async def test_greeting_and_thanks_need_no_tools(planner: OfflinePlanner) -> None:
    hello = await drive(planner, "hola", World())
    assert hello.calls == [] and hello.text.startswith("¡Hola!") and "OPENAI_API_KEY" in hello.text
    thanks = await drive(planner, "gracias", World())
    assert thanks.calls == [] and thanks.text == "¡De nada!"


async def test_where_am_i_names_the_nearest_address(planner: OfflinePlanner) -> None:
    turn = await drive(planner, "¿dónde estoy?", World())
    assert "lat 40.4, lon -3.7" in turn.text and "Calle Mayor 1, Madrid" in turn.text
