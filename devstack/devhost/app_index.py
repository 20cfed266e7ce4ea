"""The app's own function index: ``function_app.py`` imported from its directory, its HTTP
functions as routes in the order the Functions host tries them, its other functions listed."""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, cast

import azure.functions as func
from azure.functions.decorators.function_app import Function
from azure.functions.timer import TimerRequest

from devstack.devhost.routes import RouteTemplate
from devstack.devhost.settings import apply_settings, read_route_prefix, read_settings


@dataclass(frozen=True)
class Route:
    """An HTTP function as registered by the app."""

    name: str
    template: RouteTemplate
    methods: tuple[str, ...] | None  # None: every method
    arg_name: str
    auth_level: str | None  # informational: like func start, keys are not checked
    function: Callable[..., Any] = field(repr=False)
    wants_context: bool = False

    def allows(self, method: str) -> bool:
        return self.methods is None or method.upper() in self.methods


@dataclass(frozen=True)
class BackgroundFunction:
    """A non-HTTP function: listed at start-up, run on demand through the admin API
    (`POST /admin/functions/{name}`), as `func start` allows for timer triggers, and a timer on
    its schedule when the host is told to run it (`devstack.devhost.timers`)."""

    name: str
    trigger_type: str
    arg_name: str = ""
    function: Callable[..., Any] | None = field(default=None, repr=False)
    schedule: str = ""  # a timer trigger's NCRONTAB schedule

    def run(self) -> Any:
        if self.trigger_type != "timerTrigger" or self.function is None:
            raise TypeError(f"{self.name} is a {self.trigger_type}; the dev host runs timer triggers only")
        return self.function(**{self.arg_name: TimerRequest(past_due=False)})


@dataclass(frozen=True)
class LoadedApp:
    """The indexed app: routes in registration order, plus the functions not served."""

    directory: Path
    route_prefix: str
    routes: tuple[Route, ...]
    background: tuple[BackgroundFunction, ...] = ()
    _matching_order: tuple[Route, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_matching_order", tuple(sorted(self.routes, key=matching_key)))

    def find(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        """Return the route serving ``method`` on a decoded ``path`` and its params: the first, in
        the host's order, whose template matches and whose trigger lists the method."""
        for route in self._matching_order:
            params = route.template.match(path)
            if params is not None and route.allows(method):
                return route, params
        return None


def matching_key(route: Route) -> str:
    """Where a route stands in the order the Functions host tries routes: its function's name,
    compared as .NET's ``StringComparer.OrdinalIgnoreCase`` compares the names Azure allows
    (ASCII letters, digits, ``_`` and ``-``), that is upper-cased, code point by code point."""
    return route.name.upper()


def load_app(app_dir: str | os.PathLike[str]) -> LoadedApp:
    """Apply local settings, import ``function_app`` from ``app_dir`` and index it."""
    directory = Path(app_dir).resolve()
    apply_settings(read_settings(directory))
    prefix = read_route_prefix(directory)
    register = _find_function_register(_import_function_app(directory))
    routes, background = [], []
    for function in register.get_functions():  # only once: a second call fails on duplicate names
        if function.is_http_function():
            routes.append(_route_for(function, prefix))
        else:
            background.append(_background_for(function))
    return LoadedApp(directory, prefix, tuple(routes), tuple(background))


def _import_function_app(directory: Path) -> ModuleType:
    if sys.path[:1] != [str(directory)]:
        sys.path.insert(0, str(directory))
    # Loaded by file path so a `function_app` cached from another directory is never reused.
    spec = importlib.util.spec_from_file_location("function_app", directory / "function_app.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {directory / 'function_app.py'}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["function_app"] = module
    spec.loader.exec_module(module)
    return module


def _find_function_register(module: ModuleType) -> func.FunctionRegister:
    found = {id(value): value for value in vars(module).values() if isinstance(value, func.FunctionRegister)}
    if len(found) != 1:
        raise RuntimeError(
            f"function_app.py must define exactly one FunctionApp instance, found {len(found)}"
        )
    return next(iter(found.values()))


class _HttpTrigger(Protocol):
    """What the dev host reads from an HTTP function's trigger: an `HttpTrigger`, or a generic
    trigger of type httpTrigger, whose route the SDK has set to the function's name if unset."""

    name: str
    route: str | None
    methods: Iterable[Any] | None
    auth_level: Any


def _name_of(function: Function) -> str:
    name = function.get_function_name()
    if name is None:  # the SDK names every function it builds
        raise RuntimeError(f"a function without a name in function_app.py: {function}")
    return name


def _route_for(function: Function, prefix: str) -> Route:
    trigger = cast(_HttpTrigger, function.get_trigger())  # is_http_function(): an HTTP trigger
    name = _name_of(function)
    route = trigger.route if trigger.route is not None else name
    user_function = function.get_user_function()
    return Route(
        name=name,
        template=RouteTemplate.parse("/".join(part for part in (prefix, route.strip("/")) if part)),
        methods=tuple(_enum_name(method) for method in trigger.methods or ()) or None,
        arg_name=trigger.name,
        auth_level=None if trigger.auth_level is None else _enum_name(trigger.auth_level),
        function=user_function,
        wants_context="context" in inspect.signature(user_function).parameters,
    )


def _background_for(function: Function) -> BackgroundFunction:
    trigger = function.get_trigger()
    return BackgroundFunction(
        name=_name_of(function),
        trigger_type=_trigger_type(function),
        arg_name=getattr(trigger, "name", ""),
        function=function.get_user_function(),
        schedule=str(getattr(trigger, "schedule", "") or ""),
    )


def _enum_name(value: Any) -> str:
    """``HttpMethod.GET``, ``"get"`` and ``"HttpMethod.GET"`` all give ``"GET"``."""
    return str(value).upper().rsplit(".", 1)[-1]


def _trigger_type(function: Function) -> str:
    trigger = function.get_trigger()
    return trigger.get_binding_name() if trigger is not None else "unknown"
