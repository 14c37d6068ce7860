"""verifier: a vendor-verifier style evaluation harness for OpenAI-compatible endpoints."""

__version__ = "0.1.0"
