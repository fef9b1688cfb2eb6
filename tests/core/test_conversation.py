from __future__ import annotations

from idee_notebook_agent.core.conversation import (
    AssistantMessage,
    Conversation,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from idee_notebook_agent.core.events import ToolCallEvent


def test_conversation_round_trips_through_json_without_loss():
    conv = Conversation(map_state={"center": {"lat": 40.0, "lon": -3.0}, "zoom": 5})
    conv.add(UserMessage("Llévame a Cádiz ñ"))
    call = ToolCall("zoomTo", {"lat": 36.5, "lon": -6.3, "zoom": 12})
    conv.add(AssistantMessage("Voy", [call], sources=[{"source": "a.md", "chunk_index": 1}]))
    conv.add(ToolResultMessage(call.id, "zoomTo", {"success": True}, True))
    conv.pending_calls = [ToolCall("getMapCenter", {})]
    again = Conversation.from_json(conv.to_json())
    assert again.to_dict() == conv.to_dict()
    assert (
        isinstance(again.messages[1], AssistantMessage)
        and again.messages[1].tool_calls[0].args["lat"] == 36.5
    )
    assert "ñ" in conv.to_json()


def test_title_is_first_user_message_truncated():
    conv = Conversation()
    conv.add(UserMessage("x" * 300))
    conv.add(UserMessage("segundo"))
    assert conv.title == "x" * 100


def test_tool_call_ids_are_never_empty_and_wire_shape_is_contract():
    call = ToolCall.from_wire({"name": "zoomTo", "args": None, "id": ""})
    assert call.id.startswith("call_") and call.args == {}
    assert ToolCallEvent([call], awaiting_client=True).to_dict() == {
        "type": "tool_call",
        "toolCalls": [{"name": "zoomTo", "args": {}, "id": call.id}],
    }
