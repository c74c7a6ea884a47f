"""Serving over HTTP: an OpenAI-compatible streaming client (``client``) that sends one
request trace (``trace``) to an endpoint and records each request (``records``), a
Prometheus scrape helper (``metrics``), and an OpenAI-compatible server (``server``) over a
pluggable backend (``backend``), with helpers to run it (``launch``)."""
