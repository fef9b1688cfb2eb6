"""REST/SSE server for the API-IDEE chat plugin (``idee-agent serve``); see ``README.md`` here.

``create_app`` lives in ``server.app``; importing this package loads nothing heavy.
"""
