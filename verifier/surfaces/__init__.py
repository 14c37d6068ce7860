"""The API surfaces (chat, completions, responses, messages) and their wire modes: the registry and request
translation (translate.py: MODES, surface_of, translate, to_messages) and the per-surface body and event parsing
(parse.py). Imports only the base modules (types, jsonsafe). Phase 2 of issue 23 makes it one adapter per surface.
"""
