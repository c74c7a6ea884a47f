"""Names vulture cannot see used (tests/unit/test_dead_code.py reads this file as code):
each is reached only by the runtime or a library, never by a call in kimi_bench. Add a
name here only with the reason; dead code is removed, not listed."""

# ruff: noqa: B018, F821
# (bare names are what vulture counts as a use; ``_`` stands for any object)

_.signum  # signal handlers' first argument (signal.signal calls them with it)
_.objtype  # the owner argument of a descriptor's __get__ (infra/stats)
_.__signature__  # typer reads a built command's parameters from it (cli/build)
_._root  # the typer app's callback (@app.callback in cli/main): --version, --help
_.reducer_override  # pickle.Pickler's hook, called by pickle (engine/procs)
_.model_config  # pydantic reads each model's configuration from it
_.patch_embed  # read by SGLang's vision tower code from the stand-in (sglang_ref/calls)
_.server_ttft_mean_ms  # a field of serve_overhead.Overhead, written to JSON by asdict
_.do_GET  # http.server.BaseHTTPRequestHandler dispatches GET to it (serving/file_server)
_.log_message  # BaseHTTPRequestHandler's logging hook, overridden to stay quiet
_.daemon_threads  # socketserver.ThreadingMixIn reads it (serving/file_server)
