"""Talking to an endpoint: the HTTP client (endpoint.py), bounded body and stream reading (bodyread.py), what the
server says about itself (serverinfo.py), the preflight ping (preflight.py) and the dual path's client-side
rendering (dualpath.py). Imports the base modules and surfaces; never judges an answer.
"""
