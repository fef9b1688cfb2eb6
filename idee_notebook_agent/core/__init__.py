"""Agent core: events, conversation model, prompts, the MapPort protocol and the agent loop."""
