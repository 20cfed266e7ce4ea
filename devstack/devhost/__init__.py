"""Local development host for an Azure Functions Python v2 app, in place of ``func start``.

Usage: ``python -m devstack.devhost [--host H] [--port P] [--app-dir DIR]``

It serves the HTTP functions of ``DIR/function_app.py`` the way the Functions
host does locally, and promises:

* ``Values`` from ``local.settings.json`` (else ``local.settings.json.example``)
  become environment variables before the app is imported; variables already
  set are left alone.
* Routes come only from the app's own function index, under
  ``extensions.http.routePrefix`` from ``host.json`` (default ``api``), with
  Azure's template syntax: ``{id}``, ``{id?}``, ``{id:int}``, ``{*rest}``;
  literals match case-insensitively.
* Routes are tried in the order the Functions host tries them: by function
  name, ignoring case, the first whose template and methods match serving.
  The host sorts its functions by name (``FunctionMetadataManager``) and
  matches their routes in that order (``WebJobsRouter``, a plain ASP.NET
  ``RouteCollection``), not by ASP.NET's template precedence: a literal route
  loses to a parameter or catch-all route whose function's name sorts first
  (azure-functions-host#9876).
* An unmatched path, or a method the matching trigger does not list, answers
  404. A function that raises answers 500 with an empty body and its traceback
  on stderr. Request bodies over 100 MB answer 413.
* ``X-Forwarded-For`` gets the peer's ``ip:port`` appended, as Azure's front
  end does.
* Requests run in parallel on daemon threads; ``async def`` functions share one
  event loop, as they do in the Python worker. HTTP/1.1 keep-alive works.
* One line per request goes to stderr: method, path, status, duration. The
  method and path are the client's text, so control and format characters in
  them (ESC, CR, U+202E, ...) are written as backslash escapes.

Like ``func start`` it does not check function keys (its admin API may: devstack/admin.py).
Unlike it, it runs non-HTTP triggers only on request and provides no other bindings.

The modules: ``settings`` (local settings and the route prefix), ``routes`` (route templates),
``app_index`` (importing the app and indexing its functions), ``invocation`` (calling a function
as the worker does), ``wire`` (request target, headers, body framing, log text), ``server``
(HTTP and the start-up banner) and ``__main__`` (the command line).
"""
