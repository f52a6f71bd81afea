"""Tests of the provider adapters against a local scripted HTTP server."""
