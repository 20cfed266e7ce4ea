"""Local development host for an Azure Functions Python v2 app, in place of ``func start``:
``python -m devstack.devhost [--host H] [--port P] [--app-dir DIR] [--timers NAMES]`` serves the
HTTP functions of ``DIR/function_app.py`` from the app's own function index and runs its timers,
as the Functions host does locally. What it promises: docs/development.md#dev-host.

The modules: ``settings`` (local settings, the route prefix), ``routes`` (route templates),
``app_index`` (the app's function index), ``invocation`` (calling a function as the worker does),
``wire`` (request target, headers, body framing, log text), ``timers`` (schedules), ``server``
(HTTP, the start-up banner) and ``__main__`` (the command line).
"""
