"""Azure's route templates (``{id}``, ``{id?}``, ``{id:int}``, ``{*rest}``, ``{id=default}``)
compiled to regular expressions; literals match case-insensitively."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field


def _is_integer(value: str, bits: int) -> bool:
    limit = 2 ** (bits - 1)
    return re.fullmatch(r"-?\d+", value) is not None and -limit <= int(value) < limit


def _is_guid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


# Constraints not listed here accept any value.
_CONSTRAINTS: dict[str, Callable[[str], bool]] = {
    "int": lambda value: _is_integer(value, 32),
    "long": lambda value: _is_integer(value, 64),
    "bool": lambda value: value.lower() in ("true", "false"),
    "alpha": lambda value: re.fullmatch("[A-Za-z]+", value) is not None,
    "guid": _is_guid,
}
_PARAM_PATTERN = re.compile(r"\{([^{}]+)\}")


@dataclass(frozen=True)
class RouteParam:
    """One ``{...}`` parameter of a route template."""

    name: str
    constraints: tuple[str, ...] = ()
    optional: bool = False
    catch_all: bool = False
    default: str | None = None

    @classmethod
    def parse(cls, text: str) -> RouteParam:
        catch_all = text.startswith("*")
        head, has_default, default = text.lstrip("*").partition("=")
        name, *constraints = head.rstrip("?").split(":")
        return cls(
            name=name,
            constraints=tuple(c.split("(")[0].lower() for c in constraints),
            optional=head.endswith("?") or catch_all or bool(has_default),
            catch_all=catch_all,
            default=default if has_default else None,
        )

    def accepts(self, value: str) -> bool:
        return all(_CONSTRAINTS.get(name, lambda _: True)(value) for name in self.constraints)


@dataclass(frozen=True)
class RouteTemplate:
    """A compiled route template; ``params[i]`` is captured by regex group ``g{i}``."""

    text: str
    pattern: re.Pattern[str] = field(repr=False)
    params: tuple[RouteParam, ...]

    @classmethod
    def parse(cls, text: str) -> RouteTemplate:
        params: list[RouteParam] = []
        regex = "".join(
            _compile_segment(segment, params) for segment in filter(None, text.strip("/").split("/"))
        )
        pattern = re.compile(f"^{regex}/?$", re.IGNORECASE)
        return cls(text.strip("/"), pattern, tuple(params))

    def match(self, path: str) -> dict[str, str] | None:
        """Return the route params for a decoded request path, or None."""
        found = self.pattern.match(path)
        if found is None:
            return None
        values: dict[str, str] = {}
        for index, param in enumerate(self.params):
            value = found.group(f"g{index}")
            if not value:
                if param.default is not None:
                    values[param.name] = param.default
            elif param.accepts(value):
                values[param.name] = value
            else:
                return None
        return values


def _compile_segment(segment: str, params: list[RouteParam]) -> str:
    """Return a regex for one path segment."""
    pieces = _PARAM_PATTERN.split(segment)  # odd indexes hold parameter texts
    if len(pieces) == 3 and pieces[0] == pieces[2] == "":
        param = RouteParam.parse(pieces[1])
        regex = f"/(?P<{_add_group(params, param)}>{'.*' if param.catch_all else '[^/]+'})"
        return f"(?:{regex})?" if param.optional else regex
    regex = "/"
    for index, piece in enumerate(pieces):
        if index % 2:
            regex += f"(?P<{_add_group(params, RouteParam.parse(piece))}>[^/]+)"
        else:
            regex += re.escape(piece)
    return regex


def _add_group(params: list[RouteParam], param: RouteParam) -> str:
    params.append(param)
    return f"g{len(params) - 1}"
