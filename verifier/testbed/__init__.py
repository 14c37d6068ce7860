"""The test bed: what the verifier is tested against, kept apart from the core.

    faults.py     the pure catalogue of frontend faults (no I/O), built from mutation.py,
                  tool_faults.py and text_faults.py
    proxy.py      the fault-injection reverse proxy (aiohttp plumbing around the catalogue)
    server.py     the scripted OpenAI-compatible test server
    engines.py    real llama.cpp engines serving packaged models (engine_models.py: the models)

The test bed may import the core; the core never imports the test bed.
"""
