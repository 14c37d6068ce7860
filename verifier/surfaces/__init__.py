"""The API surfaces and their wire modes, one adapter per surface: base.py (the `Surface` protocol, `Mode`, shared
helpers), chat.py, responses.py, messages.py (one module each: request translation, body and stream parsing, the
terminal-event rule, error shape, preflight ping body, history replay), registry.py (`SURFACES`, and `MODES` and
every lookup derived from it). Imports only the base modules (types, jsonsafe).
"""
